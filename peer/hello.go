package peer

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

const (
	helloMagic = "SCRFS"
	// protocolVersion changes whenever the handshake or frame formats do.
	protocolVersion = 2
	nonceLen        = 32
	macLen          = sha256.Size

	// helloFixedLen is magic, version, purpose, from, to, the three
	// length bytes and the nonce.
	helloFixedLen = len(helloMagic) + 2 + 1 + 4 + 4 + 4 + nonceLen
)

// purpose says what a connection is for once authenticated.
type purpose uint8

const (
	purposeLink   purpose = 1 // persistent request/response link
	purposeStream purpose = 2 // one bulk stream, named by the hello's stream id
)

func (p purpose) String() string {
	switch p {
	case purposeLink:
		return "link"
	case purposeStream:
		return "stream"
	}
	return fmt.Sprintf("purpose-%d", uint8(p))
}

// hello is the client's first message. Its encoding is canonical (parse then
// append gives the same bytes), and those bytes are the transcript the MACs
// cover, so every field is authenticated.
type hello struct {
	version uint16
	purpose purpose
	from    uint32 // claimed node index of the client
	to      uint32 // node index the client believes it dialled
	job     string
	addr    string // client's advertised listen address; "" = unknown
	stream  string // stream id; empty unless purpose is purposeStream
	terms   string // what the client's job runs with (Config.Terms)
	nonce   [nonceLen]byte
}

// appendHello encodes h after b:
//
//	"SCRFS" | version u16 | purpose u8 | from u32 | to u32 |
//	len u8 job | len u8 addr | len u8 stream | len u8 terms | nonce [32]
func appendHello(b []byte, h *hello) []byte {
	b = append(b, helloMagic...)
	b = binary.BigEndian.AppendUint16(b, h.version)
	b = append(b, byte(h.purpose))
	b = binary.BigEndian.AppendUint32(b, h.from)
	b = binary.BigEndian.AppendUint32(b, h.to)
	for _, s := range []string{h.job, h.addr, h.stream, h.terms} {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	return append(b, h.nonce[:]...)
}

// parseHello decodes and checks a hello. A hello of another protocol
// version returns ErrVersion with h.version set and nothing else parsed,
// since the rest of its layout is unknown to us.
func parseHello(b []byte) (h hello, err error) {
	if len(b) < len(helloMagic)+2 || string(b[:len(helloMagic)]) != helloMagic {
		return hello{}, fmt.Errorf("%w: bad magic (not an scrfs peer?)", ErrBadHello)
	}
	b = b[len(helloMagic):]
	h.version = binary.BigEndian.Uint16(b)
	b = b[2:]
	if h.version != protocolVersion {
		return hello{version: h.version}, fmt.Errorf("%w: protocol version %d, we speak %d", ErrVersion, h.version, protocolVersion)
	}
	if len(b) < helloFixedLen-len(helloMagic)-2 {
		return hello{}, fmt.Errorf("%w: %d bytes is too short", ErrBadHello, len(b))
	}
	h.purpose = purpose(b[0])
	h.from = binary.BigEndian.Uint32(b[1:5])
	h.to = binary.BigEndian.Uint32(b[5:9])
	b = b[9:]
	var fields [4]string
	for i := range fields {
		if len(b) < 1 {
			return hello{}, fmt.Errorf("%w: truncated", ErrBadHello)
		}
		n := int(b[0])
		if len(b) < 1+n {
			return hello{}, fmt.Errorf("%w: truncated", ErrBadHello)
		}
		fields[i] = string(b[1 : 1+n])
		b = b[1+n:]
	}
	h.job, h.addr, h.stream, h.terms = fields[0], fields[1], fields[2], fields[3]
	if len(b) != nonceLen {
		return hello{}, fmt.Errorf("%w: %d bytes where the %d-byte nonce should end it", ErrBadHello, len(b), nonceLen)
	}
	copy(h.nonce[:], b)
	switch {
	case h.purpose != purposeLink && h.purpose != purposeStream:
		return hello{}, fmt.Errorf("%w: unknown purpose %d", ErrBadHello, h.purpose)
	case h.from >= maxNodes || h.to >= maxNodes:
		return hello{}, fmt.Errorf("%w: node index out of range", ErrBadHello)
	case h.job == "":
		return hello{}, fmt.Errorf("%w: empty job id", ErrBadHello)
	case (h.purpose == purposeStream) != (h.stream != ""):
		return hello{}, fmt.Errorf("%w: stream id %q does not match purpose %s", ErrBadHello, h.stream, h.purpose)
	}
	return h, nil
}

// MAC role labels: distinct, so a MAC one side produced can never be replayed
// as the other side's.
const (
	roleServer = "scrfs-peer/1 server\x00"
	roleClient = "scrfs-peer/1 client\x00"
)

// transcriptMAC is HMAC-SHA256(secret, role ‖ helloBytes ‖ nonceS). The hello
// bytes carry nonce_c and every claimed field; nonceS makes the MAC fresh for
// the server.
func transcriptMAC(secret []byte, role string, helloBytes, nonceS []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(role))
	m.Write(helloBytes)
	m.Write(nonceS)
	return m.Sum(nil)
}

// Verdict codes: the server's last handshake message.
const (
	verdictAccept   uint8 = 0
	refuseAuth      uint8 = 1 // MAC did not verify
	refuseJob       uint8 = 2 // another job's id
	refuseVersion   uint8 = 3 // protocol version mismatch
	refuseNode      uint8 = 4 // node index out of range, ours, or not us
	refuseBusy      uint8 = 5 // too many handshakes or held streams
	refuseDuplicate uint8 = 6 // stream id already held
	refuseClosing   uint8 = 7 // node shutting down
	refuseTerms     uint8 = 8 // the job's terms differ (scheme, parameters, nodes)
)

// maxVerdictText bounds the reason text of a refusal.
const maxVerdictText = 512

// authFailureReason is the label of scrfs_peer_auth_failures_total for a
// refusal code.
func authFailureReason(code uint8) string {
	switch code {
	case refuseAuth:
		return "secret"
	case refuseJob:
		return "job"
	case refuseVersion:
		return "version"
	case refuseNode:
		return "node"
	case refuseTerms:
		return "terms"
	}
	return ""
}
