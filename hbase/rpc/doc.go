// Package rpc speaks HBase 2.x's RPC protocol over one TCP connection: the
// connection preamble and header, request and response framing, KeyValueCodec
// cell blocks, and remote Java exceptions mapped to Go errors with a retry
// class.
//
// # Connection setup
//
//	preamble   "HBas" | version u8 = 0 | auth u8 = 80 (SIMPLE) or 81 (KERBEROS)
//	header     u32 BE length | ConnectionHeader (plain protobuf, not delimited)
//
// The ConnectionHeader names the effective user, the one service the
// connection serves (ClientService, AdminService or MasterService) and the
// cell block codec. Under SIMPLE auth the server answers nothing; it starts
// reading requests. A server that refuses the connection answers with a
// response whose call id is -1 ("Authentication is required" to a SIMPLE
// client of a secure cluster) and closes: every call then fails with that
// *AuthError, which is not retried.
//
// # Kerberos (SASL GSSAPI)
//
// With Config.Kerberos, the preamble (auth 81) is followed by the SASL
// exchange of package sasl, before the header:
//
//	client     u32 BE length | token
//	server     u32 BE status = 0 | u32 BE length | token      (or length -88: use SIMPLE)
//	           u32 BE status = 1 | u32 BE length | class | u32 BE length | message
//
// The client sends the initial token (an AP-REQ), the server its AP-REP,
// the client an empty token, the server its wrapped offer of protections,
// the client its wrapped choice; the server sends nothing more on success.
// Under integrity or privacy every later byte, both ways, header first,
// travels as u32 BE length | wrap token, a token carrying a piece of the
// plain stream. Under Kerberos the header names no user: the server takes
// the authenticated principal.
//
// # Framing
//
//	request    u32 BE total | uvarint len, RequestHeader | uvarint len, param | cell block
//	response   u32 BE total | uvarint len, ResponseHeader | uvarint len, message | cell block
//
// The total counts every byte after itself. The response message is absent
// when the header carries an exception; the cell block is present when the
// header carries cell_block_meta, and its length is given there. Responses
// may come back in any order: call_id pairs them with their requests, so one
// connection carries many calls at once.
//
// # Cell blocks (KeyValueCodec)
//
//	per cell   u32 BE kvLength | u32 BE keyLength | u32 BE valueLength | key | value [| u16 tagsLength | tags]
//
// kvLength counts everything after itself. The key is the serialized
// KeyValue key (cell.AppendKey). Tags appear only with KeyValueCodecWithTags;
// rekey sends KeyValueCodec and reads either.
package rpc
