package dev.rekey.testenv;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;

import javax.management.MBeanServer;
import javax.management.ObjectName;

/**
 * Ends a client's ZooKeeper session from the server side, as the server
 * does when a client stays away past its session timeout: the session and
 * its ephemeral nodes go, the connection is closed, and a client that
 * reconnects with the old session id is told the session expired.
 *
 * <p>It goes through the management beans ZooKeeper registers for every
 * client connection (the ones an operator's JMX console shows, with their
 * terminateSession operation), so it needs no access to the mini cluster's
 * private fields. The client is named by its address as the server sees it:
 * a Go test puts a proxy in front of ZooKeeper and names the proxy's
 * upstream connection, so only that client's session ends, never the
 * HBase servers' own.
 */
final class ZkSessions {
  private ZkSessions() {}

  /** Ends the session of the client connected from addr (HOST:PORT). */
  static String expire(String addr) throws Exception {
    MBeanServer mbs = ManagementFactory.getPlatformMBeanServer();
    List<String> seen = new ArrayList<>();
    for (ObjectName n : mbs.queryNames(new ObjectName("org.apache.ZooKeeperService:*"), null)) {
      if (!n.getKeyPropertyListString().contains("Connections") || n.getKeyProperty("name3") == null) {
        continue;
      }
      String src = String.valueOf(mbs.getAttribute(n, "SourceIP"));
      seen.add(src);
      if (src.equals(addr)) {
        Object id = mbs.getAttribute(n, "SessionId");
        mbs.invoke(n, "terminateSession", null, null);
        return "ok expired " + id;
      }
    }
    return "error no ZooKeeper connection from " + addr + "; connections from " + String.join(" ", seen);
  }
}
