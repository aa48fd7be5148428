// Package all imports every storage backend of vfs, so that vfs.Open
// resolves every scheme rekey knows: hdfs://, s3a:// and s3://, gs://,
// abfs://, abfss://, wasb:// and wasbs://. Programs that want them all
// (the rekey command, benchtool) import it for its effect:
//
//	import _ "github.com/rekeyhq/rekey/vfs/all"
//
// A program that needs fewer imports the backends it needs (vfs/hdfs,
// vfs/s3, vfs/gcs, vfs/azure) and links no other SDK. Libraries (snapshot,
// pipeline, verify) import none: the program chooses.
package all

import (
	_ "github.com/rekeyhq/rekey/vfs/azure" // abfs://, abfss://, wasb://, wasbs://
	_ "github.com/rekeyhq/rekey/vfs/gcs"   // gs://
	_ "github.com/rekeyhq/rekey/vfs/hdfs"  // hdfs://
	_ "github.com/rekeyhq/rekey/vfs/s3"    // s3a://, s3://
)
