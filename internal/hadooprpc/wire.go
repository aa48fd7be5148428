package hadooprpc

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/rekeyhq/rekey/internal/hadooptoken"
)

// ErrMalformed is wrapped by every error about a message from the server
// that does not decode.
var ErrMalformed = errors.New("hadooprpc: malformed message from the server")

// Call ids with a fixed meaning (Hadoop's RpcConstants and AuthProtocol).
const (
	saslCallID    = -33 // every SASL message, and every WRAP packet
	contextCallID = -3  // the IpcConnectionContextProto
)

// rpcKindProtobuf is RpcKindProto.RPC_PROTOCOL_BUFFER; opFinal is
// OperationProto.RPC_FINAL_PACKET.
const (
	rpcKindProtobuf = 2
	opFinal         = 0
)

// RpcSaslProto.SaslState values.
const (
	saslSuccess   = 0
	saslNegotiate = 1
	saslInitiate  = 2
	saslChallenge = 3
	saslResponse  = 4
	saslWrap      = 5
)

// RpcResponseHeaderProto.RpcStatusProto values.
const (
	statusSuccess = 0
	statusError   = 1
	statusFatal   = 2
)

// requestHeader encodes an RpcRequestHeaderProto: rpcKind 1, rpcOp 2,
// callId 3 (sint32), clientId 4, retryCount 5 (sint32).
func requestHeader(callID int32, clientID []byte, retry int32) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, rpcKindProtobuf)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, opFinal)
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, protowire.EncodeZigZag(int64(callID)))
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendBytes(b, clientID)
	b = protowire.AppendTag(b, 5, protowire.VarintType)
	b = protowire.AppendVarint(b, protowire.EncodeZigZag(int64(retry)))
	return b
}

// methodHeader encodes ProtobufRpcEngine's RequestHeaderProto: methodName
// 1, declaringClassProtocolName 2, clientProtocolVersion 3.
func methodHeader(method, protocol string, version uint64) []byte {
	var b []byte
	b = appendString(b, 1, method)
	b = appendString(b, 2, protocol)
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	return protowire.AppendVarint(b, version)
}

// connectionContext encodes an IpcConnectionContextProto: userInfo 2
// (UserInformationProto, effectiveUser 1, left out when empty) and
// protocol 3.
func connectionContext(effectiveUser, protocol string) []byte {
	var user []byte
	if effectiveUser != "" {
		user = appendString(nil, 1, effectiveUser)
	}
	var b []byte
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, user)
	return appendString(b, 3, protocol)
}

// saslAuth is an RpcSaslProto.SaslAuth: method 1, mechanism 2, protocol 3,
// serverId 4, challenge 5.
type saslAuth struct {
	method, mechanism, protocol, serverID string
	challenge                             []byte
	// hasProtocol and hasServerID: the field was present. The server
	// checks the client's choice by equality with its own offer, where a
	// field present and empty (TOKEN's protocol) differs from one left
	// out, so a choice echoes the offer's fields exactly.
	hasProtocol, hasServerID bool
}

// saslMessage is an RpcSaslProto: version 1, state 2, token 3, auths 4.
type saslMessage struct {
	state    uint64
	token    []byte
	hasToken bool
	auths    []saslAuth
}

// encode encodes m; an auth's challenge is never sent back.
func (m *saslMessage) encode() []byte {
	var b []byte
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, m.state)
	if m.hasToken {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, m.token)
	}
	for _, a := range m.auths {
		var ab []byte
		ab = appendString(ab, 1, a.method)
		ab = appendString(ab, 2, a.mechanism)
		if a.protocol != "" || a.hasProtocol {
			ab = appendString(ab, 3, a.protocol)
		}
		if a.serverID != "" || a.hasServerID {
			ab = appendString(ab, 4, a.serverID)
		}
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, ab)
	}
	return b
}

// decodeSasl decodes an RpcSaslProto; state is required.
func decodeSasl(b []byte) (saslMessage, error) {
	var m saslMessage
	hasState := false
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case num == 2 && typ == protowire.VarintType:
			m.state, hasState = v, true
		case num == 3 && typ == protowire.BytesType:
			m.token, m.hasToken = raw, true
		case num == 4 && typ == protowire.BytesType:
			a, err := decodeAuth(raw)
			if err != nil {
				return err
			}
			m.auths = append(m.auths, a)
		}
		return nil
	})
	if err != nil {
		return m, fmt.Errorf("%w: RpcSaslProto: %v", ErrMalformed, err)
	}
	if !hasState {
		return m, fmt.Errorf("%w: RpcSaslProto without a state", ErrMalformed)
	}
	return m, nil
}

// decodeAuth decodes an RpcSaslProto.SaslAuth.
func decodeAuth(b []byte) (saslAuth, error) {
	var a saslAuth
	err := fields(b, func(num protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1:
			a.method = string(raw)
		case 2:
			a.mechanism = string(raw)
		case 3:
			a.protocol, a.hasProtocol = string(raw), true
		case 4:
			a.serverID, a.hasServerID = string(raw), true
		case 5:
			a.challenge = raw
		}
		return nil
	})
	return a, err
}

// responseHeader is the part of an RpcResponseHeaderProto a client acts
// on: callId 1 (uint32), status 2, exceptionClassName 4, errorMsg 5.
type responseHeader struct {
	callID       int32
	status       uint64
	class, msg   string
	hasID, hasSt bool
}

// decodeResponseHeader decodes an RpcResponseHeaderProto; callId and
// status are required.
func decodeResponseHeader(b []byte) (responseHeader, error) {
	var h responseHeader
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			// A uint32 field: Java writes a negative id as its 32-bit
			// two's complement.
			h.callID, h.hasID = int32(uint32(v)), true
		case num == 2 && typ == protowire.VarintType:
			h.status, h.hasSt = v, true
		case num == 4 && typ == protowire.BytesType:
			h.class = string(raw)
		case num == 5 && typ == protowire.BytesType:
			h.msg = string(raw)
		}
		return nil
	})
	if err != nil {
		return h, fmt.Errorf("%w: RpcResponseHeaderProto: %v", ErrMalformed, err)
	}
	if !h.hasID || !h.hasSt {
		return h, fmt.Errorf("%w: RpcResponseHeaderProto without callId or status", ErrMalformed)
	}
	return h, nil
}

// appendString appends a string field.
func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendDelimited appends msg with its varint length, as Java's
// writeDelimitedTo does.
func appendDelimited(b, msg []byte) []byte {
	return protowire.AppendBytes(b, msg)
}

// nextDelimited splits one length-delimited message off the front of b.
func nextDelimited(b []byte) (msg, rest []byte, err error) {
	m, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return nil, nil, fmt.Errorf("%w: length-delimited message: %v", ErrMalformed, protowire.ParseError(n))
	}
	return m, b[n:], nil
}

// fields walks a protobuf message's fields (hadooptoken.Fields).
var fields = hadooptoken.Fields
