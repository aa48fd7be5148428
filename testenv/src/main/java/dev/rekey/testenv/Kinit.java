package dev.rekey.testenv;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;

import org.apache.kerby.kerberos.kerb.client.KrbClient;
import org.apache.kerby.kerberos.kerb.type.ticket.TgtTicket;

/**
 * The oracle's kinit: logs a principal in from its keytab with Kerby's
 * client (the KDC's own implementation) and writes the ticket-granting
 * ticket to a ticket cache file, as kinit -kt would; the machine has no
 * MIT kinit. The ticket lifetime is the one the given krb5.conf asks for.
 */
final class Kinit {
  private Kinit() {}

  /** kinit KRB5CONF PRINCIPAL KEYTAB CCACHE. */
  static void run(String krb5conf, String principal, String keytab, String ccache) throws Exception {
    // Kerby reads krb5.conf by that name from a directory.
    Path dir = Files.createTempDirectory("rekey-kinit");
    try {
      Files.copy(Path.of(krb5conf), dir.resolve("krb5.conf"));
      KrbClient client = new KrbClient(dir.toFile());
      client.setAllowUdp(false);
      client.setAllowTcp(true);
      client.init();
      TgtTicket tgt = client.requestTgt(principal, new File(keytab));
      client.storeTicket(tgt, new File(ccache));
      System.out.println("ok " + principal + " until " + tgt.getEncKdcRepPart().getEndTime());
    } finally {
      Files.deleteIfExists(dir.resolve("krb5.conf"));
      Files.deleteIfExists(dir);
    }
  }
}
