// Package hadooptoken holds Hadoop's security tokens as rekey meets them:
// a token's protobuf form (Security.proto's TokenProto), what a delegation
// token's identifier says about itself (its owner, renewer and dates), and
// the token storage file that YARN, and Hadoop's other launchers, hand a
// process through HADOOP_TOKEN_FILE_LOCATION (both of the formats Hadoop's
// Credentials writes). It speaks to no server: internal/hadooprpc and
// hbase/rpc authenticate with the tokens.
//
// A token's identifier and password are secrets: Token's String and every
// error of this package leave them out.
package hadooptoken
