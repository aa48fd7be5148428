// Package hadooprpc is a minimal client of Hadoop's IPC (RPC version 9,
// protobuf engine) for what the HDFS library lacks: getting and
// cancelling an HDFS delegation token, which a secure HBase region server
// needs from a bulk-load caller so that it moves the caller's files as
// the caller; and authenticating with a delegation token instead of
// Kerberos (Hadoop's TOKEN method, SASL DIGEST-MD5 through
// internal/digestmd5), with the tokens of a Hadoop token storage file
// (ReadCredentialsFile, what YARN hands a container), for its own calls
// (Dial) or as a connection the HDFS library then speaks over
// (DialStream).
//
// A connection authenticates with Kerberos through SASL GSSAPI, carried in
// RpcSaslProto messages under call id -33 (NEGOTIATE, INITIATE,
// CHALLENGE/RESPONSE, SUCCESS), and, when hadoop.rpc.protection asks for
// integrity or privacy, wraps every later packet into RpcSaslProto WRAP
// messages. The GSSAPI tokens and the wrap layer are internal/sasl's: the
// mechanism is the same one HBase's RPC speaks.
//
// Messages are encoded with protowire from the field numbers of Hadoop's
// RpcHeader.proto, IpcConnectionContext.proto, ProtobufRpcEngine.proto and
// Security.proto (Hadoop 3.4).
//
// A token's identifier and password are secrets: Token's String and every
// error of this package leave them out.
package hadooprpc
