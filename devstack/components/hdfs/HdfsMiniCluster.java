// devstack HDFS: one NameNode and its DataNodes (Hadoop's MiniDFSCluster) in this JVM.
//
// Why not Hadoop's own MiniHadoopClusterManager: it builds the cluster without
// checkDataNodeAddrConfig and checkDataNodeHostConfig, so MiniDFSCluster overwrites
// dfs.datanode.http.address with 127.0.0.1:<port> and dfs.datanode.hostname with 127.0.0.1,
// and a WebHDFS redirect then names a DataNode that pods (in their own network namespaces)
// cannot reach. Here the DataNode's addresses and host name given with -D are kept.
//
// ./up compiles it into the jar cache (not the repository) and runs it. Options follow
// MiniHadoopClusterManager's:
//   -format              start with an empty name directory
//   -datanodes N         DataNodes (default 1)
//   -nnport P            NameNode RPC port
//   -nnhttpport P        NameNode HTTP port (WebHDFS)
//   -D key=value         a Hadoop setting (repeatable)
//   -writeConfig FILE    the cluster's configuration as XML once it is up
//   -writeDetails FILE   JSON: namenode_port, namenode_http_port, datanode_hostname (the name
//                        WebHDFS redirects give the first DataNode), datanode_http_port
// The base directory is MiniDFSCluster's: the system property test.build.data.

import java.io.File;
import java.io.FileOutputStream;
import java.io.FileWriter;
import java.io.OutputStream;
import java.io.Writer;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.server.common.HdfsServerConstants.StartupOption;
import org.apache.hadoop.hdfs.server.datanode.DataNode;

public class HdfsMiniCluster {
  public static void main(String[] args) throws Exception {
    Configuration conf = new HdfsConfiguration();
    boolean format = false;
    int dataNodes = 1, nnPort = 8020, nnHttpPort = 9870;
    String writeConfig = null, writeDetails = null;
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      switch (a) {
        case "-format": format = true; break;
        case "-datanodes": dataNodes = Integer.parseInt(value(args, ++i, a)); break;
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
    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
        .nameNodePort(nnPort).nameNodeHttpPort(nnHttpPort).numDataNodes(dataNodes)
        .format(format).startupOption(format ? StartupOption.FORMAT : StartupOption.REGULAR)
        .checkDataNodeAddrConfig(true)  // keep dfs.datanode.{address,http.address,ipc.address}
        .checkDataNodeHostConfig(true)  // keep dfs.datanode.hostname
        .build();
    cluster.waitActive();
    if (writeConfig != null) {
      File tmp = new File(writeConfig + ".tmp");
      try (OutputStream out = new FileOutputStream(tmp)) {
        cluster.getConfiguration(0).writeXml(out);
      }
      Files.move(tmp.toPath(), new File(writeConfig).toPath(), StandardCopyOption.REPLACE_EXISTING);
    }
    if (writeDetails != null) {  // written last: ./up waits for this file
      DataNode dn = cluster.getDataNodes().get(0);
      String json = "{\"namenode_port\":" + cluster.getNameNodePort()
          + ",\"namenode_http_port\":" + cluster.getNameNode().getHttpAddress().getPort()
          + ",\"datanode_hostname\":\"" + dn.getDatanodeId().getHostName() + "\""
          + ",\"datanode_http_port\":" + dn.getInfoPort() + "}";
      File tmp = new File(writeDetails + ".tmp");
      try (Writer out = new FileWriter(tmp)) {
        out.write(json);
      }
      Files.move(tmp.toPath(), new File(writeDetails).toPath(), StandardCopyOption.REPLACE_EXISTING);
    }
    System.out.println("HdfsMiniCluster: up, NameNode RPC port " + cluster.getNameNodePort());
    // Until SIGTERM, as MiniHadoopClusterManager: the NameNode syncs its edit log on every
    // change, and MiniDFSCluster.shutdown() cannot run from a JVM shutdown hook (it removes
    // Hadoop's own hooks, which the JVM refuses during shutdown).
    Thread.currentThread().join();
  }

  private static String value(String[] args, int i, String option) {
    if (i >= args.length) throw new IllegalArgumentException(option + " needs a value");
    return args[i];
  }
}
