package hdfs

import (
	"testing"

	"github.com/colinmarc/hdfs/v2/hadoopconf"
)

// TestTokenService: the service a delegation token is named by is what
// Hadoop's DFSClient sets (a region server compares it with its own
// token's): "ha-hdfs:<nameservice>" for a logical nameservice, else the
// NameNode's address by IP, or by host when
// hadoop.security.token.service.use_ip is false.
func TestTokenService(t *testing.T) {
	ha := hadoopconf.HadoopConf{"dfs.ha.namenodes.ns1": "nn1,nn2"}
	for _, c := range []struct {
		conf      hadoopconf.HadoopConf
		authority string
		addrs     []string
		want      string
	}{
		{ha, "ns1", []string{"127.0.0.1:8020", "127.0.0.1:8021"}, "ha-hdfs:ns1"},
		{nil, "127.0.0.1:9000", []string{"127.0.0.1:9000"}, "127.0.0.1:9000"},
		{nil, "localhost:9000", []string{"localhost:9000"}, "127.0.0.1:9000"},
		{hadoopconf.HadoopConf{"hadoop.security.token.service.use_ip": "false"}, "LocalHost:9000", []string{"LocalHost:9000"}, "localhost:9000"},
	} {
		if got := tokenService(c.conf, c.authority, c.addrs); got != c.want {
			t.Errorf("tokenService(%s, %v) = %q, want %q", c.authority, c.addrs, got, c.want)
		}
	}
}
