package dev.rekey.testenv;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.util.CommonFSUtils;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.ssl.KeyStoreTestUtil;

/**
 * Kerberos for the mini cluster, set up the way HBase's own secure tests
 * do it: a MiniKdc on 127.0.0.1 (realm EXAMPLE.COM, TCP only), one
 * {@code user/localhost} principal for every daemon (NameNode, DataNode,
 * HMaster, RegionServers: one JVM has one login user), an HTTP principal
 * for the NameNode's SPNEGO web endpoints, HTTPS-only HDFS web UIs with
 * test keystores, block access tokens and SASL on the DataNode's data
 * transfer port. HBase's web UIs stay off (Conf.cluster).
 *
 * <p>Used by Cluster when the system property {@code rekey.secure} is set
 * (testenv/bin/up with SECURE=1). Choices come from the environment:
 * TESTENV_DATA_PROTECTION (dfs.data.transfer.protection: authentication,
 * integrity (default), privacy), TESTENV_RPC_PROTECTION (hbase.rpc.protection,
 * same values, default authentication) and TESTENV_TICKET_LIFETIME
 * (seconds, or with an s/m/h suffix: the ticket lifetime in krb5-short.conf,
 * a client krb5.conf for renewal tests; default 90s).
 *
 * <p>The daemons keep the KDC's ordinary lifetimes (24 h): a short lifetime
 * for every ticket would make the daemons' own connections the test. A
 * client that wants short tickets asks for them (ticket_lifetime in its
 * krb5.conf) and the KDC grants what was asked.
 */
final class SecureCluster {
  /** The realm MiniKdc serves. */
  static final String REALM = "EXAMPLE.COM";
  /**
   * The daemons' principal. Host part localhost: clients expand _HOST to
   * the lowercased canonical name of the server's address, and 127.0.0.1
   * resolves to localhost here (/etc/hosts) and on CI.
   */
  static final String SERVICE = "user/localhost@" + REALM;
  /** The NameNode's SPNEGO principal (its web endpoints). */
  static final String HTTP = "HTTP/localhost@" + REALM;
  /** rekey's own principal: an ordinary user, not the HDFS superuser. */
  static final String CLIENT = "rekey@" + REALM;

  private final Path dir;
  private final String dataProtection;
  private final String rpcProtection;
  private final long shortLifetimeSeconds;
  private MiniKdc kdc;
  private Path serviceKeytab;
  private Path clientKeytab;

  private SecureCluster(Path dir, String dataProtection, String rpcProtection, long shortLifetimeSeconds) {
    this.dir = dir;
    this.dataProtection = dataProtection;
    this.rpcProtection = rpcProtection;
    this.shortLifetimeSeconds = shortLifetimeSeconds;
  }

  /**
   * Returns the secure setup asked for by the rekey.secure system property,
   * or null for the plain cluster. Its files go to RUN/secure.
   */
  static SecureCluster fromEnvironment(Path run) {
    if (System.getProperty("rekey.secure") == null) {
      return null;
    }
    return new SecureCluster(run.resolve("secure"),
        protection("TESTENV_DATA_PROTECTION", "integrity"),
        protection("TESTENV_RPC_PROTECTION", "authentication"),
        seconds(envOr("TESTENV_TICKET_LIFETIME", "90s")));
  }

  private static String envOr(String name, String dflt) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? dflt : v;
  }

  /**
   * SASL qualities of protection from the environment, checked: one, or a
   * comma-separated list (the server then offers each), as Hadoop and HBase
   * take them.
   */
  private static String protection(String name, String dflt) {
    String v = envOr(name, dflt).toLowerCase(Locale.ROOT);
    for (String q : v.split(",")) {
      if (!List.of("authentication", "integrity", "privacy").contains(q)) {
        throw new IllegalArgumentException(name + "=" + v + ": want authentication, integrity or privacy, or a comma-separated list of them");
      }
    }
    return v;
  }

  /** Parses 90, 90s, 2m or 1h into seconds. */
  static long seconds(String v) {
    String s = v.trim().toLowerCase(Locale.ROOT);
    long unit = 1;
    if (s.endsWith("s")) {
      s = s.substring(0, s.length() - 1);
    } else if (s.endsWith("m")) {
      unit = 60;
      s = s.substring(0, s.length() - 1);
    } else if (s.endsWith("h")) {
      unit = 3600;
      s = s.substring(0, s.length() - 1);
    }
    long n = Long.parseLong(s) * unit;
    if (n < 60) {
      // gokrb5 renews at 5/6 of the lifetime and the KDC allows 5 minutes
      // of skew; below a minute tickets expire while they are being used.
      throw new IllegalArgumentException("TESTENV_TICKET_LIFETIME=" + v + ": want at least 60 s");
    }
    return n;
  }

  /**
   * Starts the KDC, creates the principals and keytabs, adds Kerberos to
   * the cluster's configuration and logs this JVM in as the daemons'
   * principal. Call before the cluster starts.
   */
  void configure(Configuration conf) throws Exception {
    Files.createDirectories(dir);
    Properties kconf = MiniKdc.createConf();
    kconf.setProperty(MiniKdc.KDC_BIND_ADDRESS, "127.0.0.1");
    kconf.setProperty(MiniKdc.KDC_PORT, "0");
    kdc = new MiniKdc(kconf, dir.resolve("kdc").toFile());
    kdc.start();
    serviceKeytab = dir.resolve("service.keytab");
    clientKeytab = dir.resolve("rekey.keytab");
    kdc.createPrincipal(serviceKeytab.toFile(), principal(SERVICE), principal(HTTP));
    kdc.createPrincipal(clientKeytab.toFile(), principal(CLIENT));

    String keytab = serviceKeytab.toString();
    conf.set("hadoop.security.authentication", "kerberos");
    conf.set("hbase.security.authentication", "kerberos");
    conf.setBoolean("hbase.security.authorization", true);
    // Issues HBase authentication tokens (what a YARN submission obtains
    // for its containers, and rekey's token file tests read).
    conf.set("hbase.coprocessor.region.classes", "org.apache.hadoop.hbase.security.token.TokenProvider");
    conf.set("hbase.rpc.protection", rpcProtection);
    // Hadoop's own RPC (the NameNode), TESTENV_HADOOP_RPC_PROTECTION; the
    // client configuration copies it.
    conf.set("hadoop.rpc.protection", protection("TESTENV_HADOOP_RPC_PROTECTION", "authentication"));
    conf.set("hbase.master.kerberos.principal", SERVICE);
    conf.set("hbase.master.keytab.file", keytab);
    conf.set("hbase.regionserver.kerberos.principal", SERVICE);
    conf.set("hbase.regionserver.keytab.file", keytab);
    conf.set("dfs.namenode.kerberos.principal", SERVICE);
    conf.set("dfs.namenode.keytab.file", keytab);
    conf.set("dfs.datanode.kerberos.principal", SERVICE);
    conf.set("dfs.datanode.keytab.file", keytab);
    conf.set("dfs.web.authentication.kerberos.principal", HTTP);
    conf.set("dfs.web.authentication.kerberos.keytab", keytab);
    conf.setBoolean("dfs.block.access.token.enable", true);
    conf.set("dfs.data.transfer.protection", dataProtection);
    // With privacy the DataNode and client agree on AES/CTR after the
    // DIGEST-MD5 handshake instead of DIGEST-MD5's own ciphers (3DES, RC4),
    // as Hadoop's documentation recommends for production.
    conf.set("dfs.encrypt.data.transfer.cipher.suites", "AES/CTR/NoPadding");
    // SASL on the data transfer port stands in for privileged ports (which
    // need root); the check that insists on both is for production.
    conf.setBoolean("ignore.secure.ports.for.testing", true);
    conf.set("dfs.http.policy", "HTTPS_ONLY");
    conf.set("dfs.namenode.https-address", "127.0.0.1:0");
    conf.set("dfs.datanode.https.address", "127.0.0.1:0");
    conf.setBoolean("hadoop.kerberos.keytab.login.autorenewal.enabled", true);
    // Hadoop reads ssl-server.xml and ssl-client.xml from the classpath:
    // testenv/bin/up puts RUN/secure/sslconf on it.
    Path ssl = dir.resolve("sslconf");
    Path keystores = dir.resolve("keystores");
    Files.createDirectories(ssl);
    Files.createDirectories(keystores);
    KeyStoreTestUtil.setupSSLConfig(keystores.toString(), ssl.toString(), conf, false);

    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.loginUserFromKeytab(SERVICE, keytab);
  }

  /**
   * Kerberos for MapReduce on YARN (Yarn.start on a secure cluster): the
   * ResourceManager and NodeManager log in as the daemons' principal from
   * its keytab (one JVM has one login user: a principal of their own would
   * become the HDFS and HBase daemons' login user too), so the
   * ResourceManager renews the jobs' HDFS tokens as "user", the renewer
   * MapReduce names in them. The containers run as this process's OS user
   * (DefaultContainerExecutor, YARN's default) and find the cluster's
   * client configuration where a real node's NodeManager hands it out: its
   * HADOOP_CONF_DIR.
   */
  void yarn(Configuration conf) throws IOException {
    // The NodeManager's localizer reads the job's files from HDFS with a
    // configuration of its own (new YarnConfiguration(): the classpath's
    // files only), as on a real node, where /etc/hadoop/conf is on its
    // classpath: without dfs.data.transfer.protection there, it reads
    // blocks without SASL, which the DataNodes refuse. RUN/secure/sslconf
    // is on this JVM's classpath (testenv/bin/up).
    Files.copy(dir.resolve("conf").resolve("hdfs-site.xml"), dir.resolve("sslconf").resolve("hdfs-site.xml"),
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    String keytab = serviceKeytab.toString();
    conf.set("yarn.resourcemanager.principal", SERVICE);
    conf.set("yarn.resourcemanager.keytab", keytab);
    conf.set("yarn.nodemanager.principal", SERVICE);
    conf.set("yarn.nodemanager.keytab", keytab);
    // The web UIs are not what is tested: no SPNEGO filter on them.
    conf.setBoolean("yarn.resourcemanager.webapp.delegation-token-auth-filter.enabled", false);
    // A node's /etc/krb5.conf, for the containers' JVMs (the
    // ApplicationMaster's and the tasks' Hadoop needs the default realm);
    // rekey itself is given none.
    conf.set("yarn.nodemanager.admin-env",
        "MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX,HADOOP_CONF_DIR=" + dir.resolve("conf")
            + ",JAVA_TOOL_OPTIONS=-Djava.security.krb5.conf=" + dir.resolve("krb5.conf"));
  }

  /** The short name of rekey's principal (its home folder's owner). */
  static String clientShortName() {
    return CLIENT.substring(0, CLIENT.indexOf('@'));
  }

  /** The principal without its realm, as MiniKdc.createPrincipal takes it. */
  private static String principal(String full) {
    return full.substring(0, full.indexOf('@'));
  }

  /**
   * Writes the client files (krb5.conf, krb5-short.conf, a Hadoop and
   * HBase client configuration directory) for the running cluster and
   * returns the state's "secure" block naming them.
   */
  Map<String, Object> clientState(Configuration cc, String namenode) throws IOException {
    Path krb5 = dir.resolve("krb5.conf");
    Path krb5Short = dir.resolve("krb5-short.conf");
    String kdcAddr = "127.0.0.1:" + kdc.getPort();
    Files.writeString(krb5, krb5Conf(kdcAddr, 0), StandardCharsets.UTF_8);
    Files.writeString(krb5Short, krb5Conf(kdcAddr, shortLifetimeSeconds), StandardCharsets.UTF_8);
    Path confDir = dir.resolve("conf");
    Files.createDirectories(confDir);
    writeClientConf(cc, namenode, confDir);

    Map<String, Object> s = new LinkedHashMap<>();
    s.put("realm", REALM);
    s.put("kdc", kdcAddr);
    s.put("krb5_conf", krb5.toString());
    s.put("krb5_short_conf", krb5Short.toString());
    s.put("short_ticket_lifetime_seconds", shortLifetimeSeconds);
    s.put("hadoop_conf_dir", confDir.toString());
    s.put("client_principal", CLIENT);
    s.put("client_keytab", clientKeytab.toString());
    s.put("hbase_principal", SERVICE);
    s.put("hbase_keytab", serviceKeytab.toString());
    s.put("service_principal_pattern", "user/_HOST@" + REALM);
    s.put("data_transfer_protection", dataProtection);
    s.put("rpc_protection", rpcProtection);
    return s;
  }

  /**
   * A client krb5.conf for the KDC: TCP only (MiniKdc serves no UDP),
   * AES only (gokrb5 has no RC4 or DES3 GSS tokens), no DNS. lifetime 0
   * leaves the ticket lifetime to the KDC.
   */
  static String krb5Conf(String kdcAddr, long lifetimeSeconds) {
    StringBuilder b = new StringBuilder();
    b.append("[libdefaults]\n");
    b.append("  default_realm = ").append(REALM).append('\n');
    b.append("  udp_preference_limit = 1\n");
    b.append("  dns_lookup_kdc = false\n");
    b.append("  dns_lookup_realm = false\n");
    b.append("  default_tkt_enctypes = aes128-cts-hmac-sha1-96 aes256-cts-hmac-sha1-96\n");
    b.append("  default_tgs_enctypes = aes128-cts-hmac-sha1-96 aes256-cts-hmac-sha1-96\n");
    b.append("  permitted_enctypes = aes128-cts-hmac-sha1-96 aes256-cts-hmac-sha1-96\n");
    if (lifetimeSeconds > 0) {
      b.append("  ticket_lifetime = ").append(lifetimeSeconds).append("s\n");
      // Not renewable: the client must log in again from its keytab, the
      // path a long run takes once the renewable lifetime is spent.
      b.append("  renew_lifetime = 0s\n");
    }
    b.append("\n[realms]\n");
    b.append("  ").append(REALM).append(" = {\n");
    b.append("    kdc = ").append(kdcAddr).append('\n');
    b.append("  }\n");
    return b.toString();
  }

  /**
   * Writes core-site.xml, hdfs-site.xml and hbase-site.xml for clients:
   * what a cluster's client configuration carries, with the server
   * principals in their _HOST form as real clusters write them.
   */
  private void writeClientConf(Configuration cc, String namenode, Path confDir) throws IOException {
    String pattern = "user/_HOST@" + REALM;
    Configuration core = new Configuration(false);
    core.set("fs.defaultFS", "hdfs://" + namenode);
    core.set("hadoop.security.authentication", "kerberos");
    core.set("hadoop.rpc.protection", cc.get("hadoop.rpc.protection", "authentication"));
    write(core, confDir.resolve("core-site.xml"));

    Configuration hdfs = new Configuration(false);
    hdfs.set("dfs.namenode.kerberos.principal", pattern);
    hdfs.set("dfs.datanode.kerberos.principal", pattern);
    hdfs.set("dfs.data.transfer.protection", dataProtection);
    hdfs.setBoolean("dfs.block.access.token.enable", true);
    write(hdfs, confDir.resolve("hdfs-site.xml"));

    Configuration hbase = new Configuration(false);
    hbase.set("hbase.zookeeper.quorum", "127.0.0.1");
    hbase.set("hbase.zookeeper.property.clientPort", cc.get("hbase.zookeeper.property.clientPort"));
    hbase.set("zookeeper.znode.parent", cc.get("zookeeper.znode.parent", "/hbase"));
    hbase.set("hbase.rootdir", "hdfs://" + namenode + CommonFSUtils.getRootDir(cc).toUri().getPath());
    hbase.set("hbase.security.authentication", "kerberos");
    hbase.set("hbase.rpc.protection", rpcProtection);
    hbase.set("hbase.master.kerberos.principal", pattern);
    hbase.set("hbase.regionserver.kerberos.principal", pattern);
    write(hbase, confDir.resolve("hbase-site.xml"));
  }

  private static void write(Configuration c, Path p) throws IOException {
    try (OutputStream out = Files.newOutputStream(p)) {
      c.writeXml(out);
    }
  }

  /** Stops the KDC (the cluster first: its daemons renew against it). */
  void stop() {
    if (kdc != null) {
      kdc.stop();
    }
  }

  /**
   * Client settings for the oracle against a secure cluster: the written
   * client configuration, then a keytab login. The principal is the
   * hbase one (it reads hbase.rootdir, 700 in secure mode) unless
   * ORACLE_PRINCIPAL and ORACLE_KEYTAB name another.
   */
  @SuppressWarnings("unchecked")
  static void client(Configuration conf, Map<String, Object> st) throws IOException {
    Map<String, Object> s = (Map<String, Object>) st.get("secure");
    String confDir = (String) s.get("hadoop_conf_dir");
    for (String f : List.of("core-site.xml", "hdfs-site.xml", "hbase-site.xml")) {
      conf.addResource(new org.apache.hadoop.fs.Path(new File(confDir, f).toURI()));
    }
    System.setProperty("java.security.krb5.conf", (String) s.get("krb5_conf"));
    String principal = envOr("ORACLE_PRINCIPAL", (String) s.get("hbase_principal"));
    String keytab = envOr("ORACLE_KEYTAB", (String) s.get("hbase_keytab"));
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.loginUserFromKeytab(principal, keytab);
  }
}
