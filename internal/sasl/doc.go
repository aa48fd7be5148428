// Package sasl is the client side of the SASL GSSAPI mechanism (RFC 4752)
// over Kerberos V5 (RFC 4121), as HBase's RPC speaks it when
// hbase.security.authentication is kerberos, and Hadoop's NameNode RPC
// when hadoop.security.authentication is (internal/hadooprpc). It sits
// below both protocols, so neither reaches into the other for it.
//
// A Mechanism produces the initial token (the GSS-API initial context token
// around an AP-REQ, without SPNEGO), checks the server's AP-REP (mutual
// authentication), then answers the server's wrapped security-layer offer
// with its choice of protection. After that, a Layer wraps and unwraps
// every frame when the chosen protection is integrity or privacy.
//
// gokrb5 supplies the tickets, the AP-REQ and the RFC 3961 crypto; the wrap
// tokens (sealed and unsealed, with rotation), the AP-REP check and the
// layer negotiation are written here, because gokrb5 has no sealing and no
// SASL layer. Only AES encryption types are accepted: the older types use
// RFC 1964 tokens, which are not implemented.
//
// Nothing in this package writes keys, tickets or tokens into an error.
package sasl
