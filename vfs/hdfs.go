package vfs

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/user"
	"sort"
	"strings"
	"sync"

	"github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"
)

// HDFS is a file system on an HDFS cluster, spoken to natively.
type HDFS struct {
	client *hdfs.Client
	name   string
}

// ErrKerberos is returned when the Hadoop configuration demands Kerberos,
// which this build does not configure.
var ErrKerberos = errors.New("vfs: HDFS cluster requires Kerberos (hadoop.security.authentication=kerberos), which rekey does not support yet; read a local export of the snapshot instead")

// DialHDFS connects to the HDFS named by authority, the host:port or
// nameservice part of an hdfs:// URL. A nameservice (no port) is resolved
// through the Hadoop configuration in HADOOP_CONF_DIR (or
// HADOOP_HOME/conf): dfs.ha.namenodes.<ns> and
// dfs.namenode.rpc-address.<ns>.<nn>. The user is HADOOP_USER_NAME, else
// the OS user.
func DialHDFS(authority string) (*HDFS, error) {
	conf, err := hadoopconf.LoadFromEnvironment()
	if err != nil {
		return nil, fmt.Errorf("vfs: reading Hadoop configuration (HADOOP_CONF_DIR): %w", err)
	}
	opts := hdfs.ClientOptionsFromConf(conf)
	if opts.KerberosClient != nil {
		return nil, ErrKerberos
	}
	addrs, err := namenodeAddrs(conf, authority)
	if err != nil {
		return nil, err
	}
	opts.Addresses = addrs
	opts.User = os.Getenv("HADOOP_USER_NAME")
	if opts.User == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("vfs: no HADOOP_USER_NAME and no OS user: %w", err)
		}
		opts.User = u.Username
	}
	c, err := hdfs.NewClient(opts)
	if err != nil {
		return nil, fmt.Errorf("vfs: connecting to HDFS %s (%s): %w", authority, strings.Join(addrs, ","), err)
	}
	return &HDFS{client: c, name: "hdfs://" + authority}, nil
}

// namenodeAddrs turns the authority of an hdfs:// URL into NameNode RPC
// addresses.
func namenodeAddrs(conf hadoopconf.HadoopConf, authority string) ([]string, error) {
	if authority == "" {
		nns := conf.Namenodes()
		if len(nns) == 0 {
			return nil, errors.New("vfs: hdfs:/// URL without a host, and no fs.defaultFS in the Hadoop configuration (set HADOOP_CONF_DIR)")
		}
		return nns, nil
	}
	if strings.Contains(authority, ":") {
		return []string{authority}, nil
	}
	// A logical nameservice.
	if ids, ok := conf["dfs.ha.namenodes."+authority]; ok {
		var addrs []string
		for _, id := range strings.Split(ids, ",") {
			id = strings.TrimSpace(id)
			if a := conf["dfs.namenode.rpc-address."+authority+"."+id]; a != "" {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("vfs: nameservice %s lists namenodes %q but no dfs.namenode.rpc-address.%s.<id> entries", authority, ids, authority)
		}
		sort.Strings(addrs)
		return addrs, nil
	}
	if a := conf["dfs.namenode.rpc-address."+authority]; a != "" {
		return []string{a}, nil
	}
	if conf == nil {
		// A bare host: HDFS's default RPC port.
		return []string{authority + ":8020"}, nil
	}
	return nil, fmt.Errorf("vfs: %s is neither host:port nor a nameservice in the Hadoop configuration (HADOOP_CONF_DIR)", authority)
}

// String implements FS.
func (h *HDFS) String() string { return h.name }

// Close disconnects.
func (h *HDFS) Close() error { return h.client.Close() }

// Open implements FS.
func (h *HDFS) Open(name string) (File, error) {
	r, err := h.client.Open(name)
	if err != nil {
		return nil, err
	}
	if r.Stat().IsDir() {
		r.Close()
		return nil, &iofs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	}
	return &hdfsFile{r: r, size: r.Stat().Size(), name: name}, nil
}

// Stat implements FS.
func (h *HDFS) Stat(name string) (iofs.FileInfo, error) { return h.client.Stat(name) }

// ReadDir implements FS.
func (h *HDFS) ReadDir(name string) ([]iofs.FileInfo, error) {
	fis, err := h.client.ReadDir(name)
	if err != nil {
		return nil, err
	}
	sort.Slice(fis, func(i, j int) bool { return fis[i].Name() < fis[j].Name() })
	return fis, nil
}

// hdfsFile serialises ReadAt: the client's ReadAt seeks a shared stream.
type hdfsFile struct {
	mu   sync.Mutex
	r    *hdfs.FileReader
	size int64
	name string
}

func (f *hdfsFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.r.ReadAt(p, off)
	if err == nil && n < len(p) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}
func (f *hdfsFile) Close() error { return f.r.Close() }
func (f *hdfsFile) Size() int64  { return f.size }
func (f *hdfsFile) Name() string { return f.name }
