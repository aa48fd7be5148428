// Package rpc speaks HBase 2.x's RPC protocol over one TCP connection: the
// connection preamble and header, request and response framing, KeyValueCodec
// cell blocks, and remote Java exceptions mapped to Go errors with a retry
// class.
//
// # Connection setup
//
//	preamble   "HBas" | version u8 = 0 | auth u8 = 80 (SIMPLE)
//	header     u32 BE length | ConnectionHeader (plain protobuf, not delimited)
//
// The ConnectionHeader names the effective user, the one service the
// connection serves (ClientService, AdminService or MasterService) and the
// cell block codec. Under SIMPLE auth the server answers nothing; it starts
// reading requests.
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
