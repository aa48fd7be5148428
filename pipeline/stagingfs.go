package pipeline

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/rekeyhq/rekey/hbase"
)

// stagingWarning returns what to say, before anything is staged, when the
// staging folder is not on the file system of the cluster's hbase.rootdir
// ("" when it is, or when nothing useful can be said). A bulk load from
// another file system is no rename: each region server copies every staged
// HFile into its root dir, which for S3 staging means reading it all back
// over the network. rootDir is the cluster's root dir as far as rekey
// knows it ("" when it does not, with why in from).
func stagingWarning(staging, rootDir, from string) string {
	sfs := fileSystemOf(staging)
	if rootDir == "" {
		if sfs == "" || strings.HasPrefix(sfs, "hdfs://") {
			return "" // the documented layout: staging on the cluster's HDFS
		}
		return fmt.Sprintf("the staging folder %s is on %s, and rekey cannot learn the cluster's hbase.rootdir (%s; set HBASE_CONF_DIR to the folder of the cluster's hbase-site.xml): unless the root dir is on %s, the region servers will copy every staged HFile at load time instead of moving it", staging, sfs, from, sfs)
	}
	rfs := fileSystemOf(rootDir)
	if sfs == "" || rfs == "" {
		return ""
	}
	if sfs == rfs && strings.HasPrefix(sfs, "s3://") {
		// HBase moves a bulk-loaded file only between file systems whose
		// canonical service names are equal (FSHDFSUtils.isSameHdfs), and
		// S3A has none unless it issues delegation tokens: within one
		// bucket the region servers copy too (the testenv S3-root cluster
		// does, into its bulk load staging folder and again into the store).
		return fmt.Sprintf("the staging folder %s is in the bucket of the cluster's hbase.rootdir %s (from %s), but HBase moves a bulk-loaded file only within a file system that reports a canonical service name, which S3A does only with delegation tokens (fs.s3a.delegation.token.binding): otherwise the region servers will copy every staged HFile at load time instead of moving it, twice (into HBase's bulk load staging folder, then into the store)", staging, rootDir, from)
	}
	if sfs == rfs {
		return ""
	}
	return fmt.Sprintf("the staging folder %s is on %s, but the cluster's hbase.rootdir %s (from %s) is on %s: the region servers will copy every staged HFile at load time instead of moving it; stage under %s to load by rename", staging, sfs, rootDir, from, rfs, rfs)
}

// fileSystemOf names the file system of a location: "scheme://authority"
// with the S3 schemes as one ("s3://bucket"), the Azure schemes as one
// ("azure://container@account": abfs:// names the account's dfs endpoint
// and wasbs:// its blob endpoint, but both reach the same container),
// "local" for a path or a file:// URL, "" when it cannot tell (an
// hdfs:/// URL takes its NameNode from the configuration).
func fileSystemOf(where string) string {
	if !strings.Contains(where, "://") {
		return "local"
	}
	u, err := url.Parse(where)
	if err != nil {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "file":
		return "local"
	case "s3a", "s3n":
		scheme = "s3"
	case "abfs", "abfss", "wasb", "wasbs":
		// container@account.dfs.core.windows.net or
		// container@account.blob.core.windows.net: the account is the
		// host's first label.
		account, _, _ := strings.Cut(strings.ToLower(u.Hostname()), ".")
		if u.User == nil || account == "" {
			return ""
		}
		return "azure://" + strings.ToLower(u.User.Username()) + "@" + account
	}
	if u.Host == "" {
		return ""
	}
	return scheme + "://" + strings.ToLower(u.Host)
}

// warnStaging logs stagingWarning for the job's staging folder.
func (r *Run) warnStaging(staging string) {
	root, from := hbase.SiteRootDir()
	if msg := stagingWarning(staging, root, from); msg != "" {
		r.logf("warning: %s", msg)
	}
}
