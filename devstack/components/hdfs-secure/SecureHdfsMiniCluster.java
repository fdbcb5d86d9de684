// devstack secure HDFS: a Kerberos KDC (Hadoop's MiniKdc) and a Kerberized MiniDFSCluster
// (one NameNode, one DataNode) in this JVM.
//
// ./up compiles it into the jar cache (not the repository) and runs it. Options:
//   -home DIR            state directory: kdc/ (the KDC's work dir), keytabs, krb5.conf
//   -host NAME           this machine's host name (the DataNode's name in WebHDFS redirects and
//                        the host of an HTTP/NAME SPNEGO principal, as clients name the NameNode)
//   -realm REALM         EXAMPLE.COM
//   -kdcport P           the KDC's TCP port on 127.0.0.1
//   -user NAME           an ordinary user principal NAME@REALM with its own keytab
//   -format              start with an empty name directory
//   -nnport P, -nnhttpport P, -D key=value (repeatable), -writeConfig FILE, -writeDetails FILE
//                        as in ../hdfs/HdfsMiniCluster.java
//
// Written under -home: hdfs.keytab (hdfs/localhost and HTTP/{localhost,NAME}), NAME.keytab (the
// user), krb5.conf (for MIT clients and this JVM). Every start makes a fresh KDC with new keys,
// so keytabs and tickets of an earlier start are void.
// Security: hadoop.security.authentication=kerberos, block access tokens on, SPNEGO on the
// NameNode's HTTP (WebHDFS), ignore.secure.ports.for.testing=true (a secure DataNode on
// unprivileged ports, without SASL on data transfer or HTTPS; a test setting, never production).
// After start-up it makes /tmp and /data (1777) and /user/NAME (owned by NAME), as the superuser
// hdfs (the NameNode's login user).

import java.io.File;
import java.io.FileOutputStream;
import java.io.FileWriter;
import java.io.OutputStream;
import java.io.Writer;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.Properties;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.server.common.HdfsServerConstants.StartupOption;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.security.UserGroupInformation;

public class SecureHdfsMiniCluster {
  public static void main(String[] args) throws Exception {
    Configuration conf = new HdfsConfiguration();
    boolean format = false;
    int nnPort = 8022, nnHttpPort = 9880, kdcPort = 16088;
    String home = null, host = "localhost", realm = "EXAMPLE.COM", user = "tfk8s";
    String writeConfig = null, writeDetails = null;
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      switch (a) {
        case "-format": format = true; break;
        case "-home": home = value(args, ++i, a); break;
        case "-host": host = value(args, ++i, a); break;
        case "-realm": realm = value(args, ++i, a); break;
        case "-user": user = value(args, ++i, a); break;
        case "-kdcport": kdcPort = Integer.parseInt(value(args, ++i, a)); break;
        case "-nnport": nnPort = Integer.parseInt(value(args, ++i, a)); break;
        case "-nnhttpport": nnHttpPort = Integer.parseInt(value(args, ++i, a)); break;
        case "-writeConfig": writeConfig = value(args, ++i, a); break;
        case "-writeDetails": writeDetails = value(args, ++i, a); break;
        case "-D": {
          String kv = value(args, ++i, a);
          int eq = kv.indexOf('=');
          if (eq <= 0) throw new IllegalArgumentException("-D expects key=value, got " + kv);
          conf.set(kv.substring(0, eq), kv.substring(eq + 1));
          break;
        }
        default: throw new IllegalArgumentException("unknown option " + a);
      }
    }
    if (home == null) throw new IllegalArgumentException("-home is required");

    // ---- the KDC -------------------------------------------------------------------------
    File kdcDir = new File(home, "kdc");
    deleteTree(kdcDir);
    kdcDir.mkdirs();
    Properties kdcConf = MiniKdc.createConf();
    String[] org = realm.split("\\.", 2);
    kdcConf.setProperty(MiniKdc.ORG_NAME, org[0]);
    kdcConf.setProperty(MiniKdc.ORG_DOMAIN, org.length > 1 ? org[1] : "COM");
    kdcConf.setProperty(MiniKdc.KDC_BIND_ADDRESS, "127.0.0.1");
    kdcConf.setProperty(MiniKdc.KDC_PORT, Integer.toString(kdcPort));
    kdcConf.setProperty(MiniKdc.TRANSPORT, "TCP");
    kdcConf.setProperty(MiniKdc.MAX_TICKET_LIFETIME, "86400000");
    kdcConf.setProperty(MiniKdc.MAX_RENEWABLE_LIFETIME, "604800000");
    MiniKdc kdc = new MiniKdc(kdcConf, kdcDir);
    kdc.start();
    realm = kdc.getRealm();
    File serviceKeytab = new File(home, "hdfs.keytab");
    File userKeytab = new File(home, user + ".keytab");
    serviceKeytab.delete();
    userKeytab.delete();
    if (host.equals("localhost")) {
      kdc.createPrincipal(serviceKeytab, "hdfs/localhost", "HTTP/localhost");
    } else {
      kdc.createPrincipal(serviceKeytab, "hdfs/localhost", "HTTP/localhost", "HTTP/" + host);
    }
    kdc.createPrincipal(userKeytab, user);
    // One krb5.conf for this JVM and for MIT clients (kinit, GSSAPI): TCP to the KDC, no DNS,
    // service principals named as the client names the host (no canonicalisation).
    File krb5 = new File(home, "krb5.conf");
    File tmp = new File(home, "krb5.conf.tmp");
    try (Writer out = new FileWriter(tmp)) {
      out.write("[libdefaults]\n"
          + "  default_realm = " + realm + "\n"
          + "  udp_preference_limit = 1\n"
          + "  dns_lookup_kdc = false\n"
          + "  dns_lookup_realm = false\n"
          + "  dns_canonicalize_hostname = false\n"
          + "  rdns = false\n"
          + "  forwardable = true\n"
          + "  ticket_lifetime = 24h\n"
          + "[realms]\n"
          + "  " + realm + " = {\n"
          + "    kdc = 127.0.0.1:" + kdc.getPort() + "\n"
          + "  }\n"
          + "[domain_realm]\n"
          + "  localhost = " + realm + "\n"
          + "  " + host + " = " + realm + "\n");
    }
    Files.move(tmp.toPath(), krb5.toPath(), StandardCopyOption.REPLACE_EXISTING);
    System.setProperty("java.security.krb5.conf", krb5.getAbsolutePath());

    try (Writer out = new FileWriter(new File(home, "http-secret"))) {  // signs SPNEGO cookies
      out.write(java.util.UUID.randomUUID().toString());
    }

    // ---- the secure HDFS ---------------------------------------------------------------------
    String hdfsPrincipal = "hdfs/localhost@" + realm;
    String keytab = serviceKeytab.getAbsolutePath();
    conf.set("hadoop.security.authentication", "kerberos");
    conf.set("hadoop.security.authorization", "true");
    conf.set("dfs.namenode.kerberos.principal", hdfsPrincipal);
    conf.set("dfs.namenode.keytab.file", keytab);
    conf.set("dfs.datanode.kerberos.principal", hdfsPrincipal);
    conf.set("dfs.datanode.keytab.file", keytab);
    // "*": every HTTP/ principal of the keytab (localhost and this host's name).
    conf.set("dfs.web.authentication.kerberos.principal", "*");
    conf.set("dfs.web.authentication.kerberos.keytab", keytab);
    // The HTTP servers' filter: SPNEGO, no anonymous requests (the default, "simple" with
    // anonymous allowed, lets a request through unauthenticated and WebHDFS then answers 403).
    conf.set("hadoop.http.authentication.type", "kerberos");
    conf.set("hadoop.http.authentication.simple.anonymous.allowed", "false");
    conf.set("hadoop.http.authentication.kerberos.principal", "*");
    conf.set("hadoop.http.authentication.kerberos.keytab", keytab);
    conf.set("hadoop.http.authentication.signature.secret.file", new File(home, "http-secret").getAbsolutePath());
    conf.setBoolean("dfs.block.access.token.enable", true);
    conf.setBoolean("ignore.secure.ports.for.testing", true);
    conf.setBoolean("dfs.webhdfs.enabled", true);
    conf.set("dfs.http.policy", "HTTP_ONLY");
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.loginUserFromKeytab(hdfsPrincipal, keytab);

    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
        .nameNodePort(nnPort).nameNodeHttpPort(nnHttpPort).numDataNodes(1)
        .format(format).startupOption(format ? StartupOption.FORMAT : StartupOption.REGULAR)
        .checkDataNodeAddrConfig(true)
        .checkDataNodeHostConfig(true)
        .build();
    cluster.waitActive();

    FileSystem fs = cluster.getFileSystem();
    for (String dir : new String[] {"/tmp", "/data"}) {
      fs.mkdirs(new Path(dir));
      fs.setPermission(new Path(dir), new FsPermission((short) 01777));
    }
    fs.mkdirs(new Path("/user/" + user));
    fs.setOwner(new Path("/user/" + user), user, user);

    if (writeConfig != null) {
      File part = new File(writeConfig + ".tmp");
      try (OutputStream out = new FileOutputStream(part)) {
        cluster.getConfiguration(0).writeXml(out);
      }
      Files.move(part.toPath(), new File(writeConfig).toPath(), StandardCopyOption.REPLACE_EXISTING);
    }
    if (writeDetails != null) {  // written last: ./up waits for this file
      DataNode dn = cluster.getDataNodes().get(0);
      String json = "{\"namenode_port\":" + cluster.getNameNodePort()
          + ",\"namenode_http_port\":" + cluster.getNameNode().getHttpAddress().getPort()
          + ",\"datanode_hostname\":\"" + dn.getDatanodeId().getHostName() + "\""
          + ",\"datanode_http_port\":" + dn.getInfoPort()
          + ",\"realm\":\"" + realm + "\",\"kdc_port\":" + kdc.getPort() + "}";
      File part = new File(writeDetails + ".tmp");
      try (Writer out = new FileWriter(part)) {
        out.write(json);
      }
      Files.move(part.toPath(), new File(writeDetails).toPath(), StandardCopyOption.REPLACE_EXISTING);
    }
    System.out.println("SecureHdfsMiniCluster: up, realm " + realm + ", KDC port " + kdc.getPort()
        + ", NameNode RPC port " + cluster.getNameNodePort());
    Thread.currentThread().join();  // until SIGTERM (see ../hdfs/HdfsMiniCluster.java)
  }

  private static void deleteTree(File f) {
    File[] children = f.listFiles();
    if (children != null) for (File c : children) deleteTree(c);
    f.delete();
  }

  private static String value(String[] args, int i, String option) {
    if (i >= args.length) throw new IllegalArgumentException(option + " needs a value");
    return args[i];
  }
}
