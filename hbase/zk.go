package hbase

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/hbase/pb"
)

// pbMagic prefixes protobuf blobs HBase stores in znodes and meta cells.
var pbMagic = []byte("PBUF")

// stripZNodeData removes the metadata prefix HBase's RecoverableZooKeeper
// adds to znode data (0xFF, u32 BE id length, id) and the PBUF magic,
// leaving the protobuf message.
func stripZNodeData(b []byte, where string) ([]byte, error) {
	if len(b) > 0 && b[0] == 0xFF {
		if len(b) < 5 {
			return nil, fmt.Errorf("hbase: znode %s: metadata prefix cut short (%d bytes)", where, len(b))
		}
		n := binary.BigEndian.Uint32(b[1:])
		if uint64(n) > uint64(len(b)-5) {
			return nil, fmt.Errorf("hbase: znode %s: metadata id length %d overruns %d bytes", where, n, len(b))
		}
		b = b[5+n:]
	}
	if !bytes.HasPrefix(b, pbMagic) {
		return nil, fmt.Errorf("hbase: znode %s: no PBUF magic (not an HBase 2.x znode?)", where)
	}
	return b[len(pbMagic):], nil
}

// serverAddr renders a ServerName as host:port.
func serverAddr(sn *pb.ServerName) string {
	return fmtAddr(sn.GetHostName(), int(sn.GetPort()))
}

func fmtAddr(host string, port int) string {
	if strings.IndexByte(host, ':') >= 0 {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// zkClient reads the two znodes a client needs.
type zkClient struct {
	conn   *zk.Conn
	parent string
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

func dialZK(quorum string, parent string, sessionTimeout time.Duration) (*zkClient, error) {
	var servers []string
	for _, s := range strings.Split(quorum, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if !strings.Contains(s, ":") {
				s += ":2181"
			}
			servers = append(servers, s)
		}
	}
	if len(servers) == 0 {
		return nil, errors.New("hbase: empty ZooKeeper quorum")
	}
	conn, events, err := zk.Connect(servers, sessionTimeout, zk.WithLogger(quietLogger{}))
	if err != nil {
		return nil, fmt.Errorf("hbase: ZooKeeper %s: %w", quorum, err)
	}
	go func() {
		for range events { // the library drops events nobody reads; drain anyway
		}
	}()
	return &zkClient{conn: conn, parent: parent}, nil
}

func (z *zkClient) close() { z.conn.Close() }

// get reads one znode under the parent, honoring ctx.
func (z *zkClient) get(ctx context.Context, name string) ([]byte, error) {
	p := path.Join(z.parent, name)
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, _, err := z.conn.Get(p)
		ch <- res{b, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			if errors.Is(r.err, zk.ErrNoNode) {
				return nil, fmt.Errorf("hbase: znode %s does not exist (is HBase running, is zookeeper.znode.parent right?): %w", p, r.err)
			}
			return nil, fmt.Errorf("hbase: reading znode %s: %w", p, r.err)
		}
		return stripZNodeData(r.b, p)
	case <-ctx.Done():
		return nil, fmt.Errorf("hbase: reading znode %s: %w", p, ctx.Err())
	}
}

// metaServer returns host:port of the server holding hbase:meta.
func (z *zkClient) metaServer(ctx context.Context) (string, error) {
	b, err := z.get(ctx, "meta-region-server")
	if err != nil {
		return "", err
	}
	var m pb.MetaRegionServer
	if err := proto.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("hbase: znode %s/meta-region-server: %w", z.parent, err)
	}
	return serverAddr(m.GetServer()), nil
}

// master returns host:port of the active master.
func (z *zkClient) master(ctx context.Context) (string, error) {
	b, err := z.get(ctx, "master")
	if err != nil {
		return "", err
	}
	var m pb.Master
	if err := proto.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("hbase: znode %s/master: %w", z.parent, err)
	}
	return serverAddr(m.GetMaster()), nil
}
