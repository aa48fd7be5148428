// Package pb holds the protobuf messages rekey's HBase client exchanges with
// HBase 2.x servers: our own .proto files, trimmed copies of HBase's messages
// that keep only the fields we use, with HBase's field numbers (protobuf
// identifies fields by number, so a server reads them as its own).
//
// Regenerate after editing a .proto file with `go generate ./hbase/pb`
// (needs protoc and protoc-gen-go on PATH); the generated .pb.go files are
// committed so that building rekey needs neither.
package pb

//go:generate protoc -I ../.. --go_out=../.. --go_opt=paths=source_relative hbase/pb/hbase.proto hbase/pb/rpc.proto hbase/pb/client.proto hbase/pb/master.proto
