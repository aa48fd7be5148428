package dev.rekey.testenv;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import org.apache.hadoop.minikdc.MiniKdc;

/**
 * `oracle kdc DIR`: a MiniKdc of its own on 127.0.0.1 (realm EXAMPLE.COM,
 * TCP only, a random port) with one principal, skew@EXAMPLE.COM, whose
 * keytab and a client krb5.conf go into DIR. It prints one JSON line
 * naming them, then serves until its standard input closes.
 *
 * <p>Tests run it under faketime to get a KDC whose clock is off: the KDC
 * then judges the client's requests by its own (wrong) time, as a KDC on
 * a host with a drifted clock does.
 */
final class StandaloneKdc {
  private StandaloneKdc() {}

  static void run(String dirName) throws Exception {
    Path dir = Path.of(dirName).toAbsolutePath();
    Files.createDirectories(dir.resolve("kdc"));
    Properties conf = MiniKdc.createConf();
    conf.setProperty(MiniKdc.KDC_BIND_ADDRESS, "127.0.0.1");
    conf.setProperty(MiniKdc.KDC_PORT, "0");
    MiniKdc kdc = new MiniKdc(conf, dir.resolve("kdc").toFile());
    kdc.start();
    try {
      Path keytab = dir.resolve("skew.keytab");
      kdc.createPrincipal(keytab.toFile(), "skew");
      Path krb5 = dir.resolve("krb5.conf");
      Files.writeString(krb5, SecureCluster.krb5Conf("127.0.0.1:" + kdc.getPort(), 0), StandardCharsets.UTF_8);
      System.out.printf("{\"port\": %d, \"krb5_conf\": \"%s\", \"keytab\": \"%s\", \"principal\": \"skew@%s\", \"now_ms\": %d}%n",
          kdc.getPort(), krb5, keytab, kdc.getRealm(), System.currentTimeMillis());
      System.out.flush();
      InputStream in = System.in;
      while (in.read() >= 0) {
        // Serve until the caller closes our standard input.
      }
    } finally {
      kdc.stop();
    }
  }
}
