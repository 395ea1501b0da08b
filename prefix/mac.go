package prefix

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// The prefix is an untrusted store: whoever may write there (other users
// of a shared directory, anyone with write access to a bucket) could
// replace a file and patch its CRC32C in the manifest, which is a checksum,
// not a signature. So every manifest part, merged manifest and index entry
// carries an HMAC-SHA256 under a key only the job's user holds (key.go),
// and a fetch refuses what does not verify. docs/formats-prefix.md has the
// threat model.

// Trust says whether a piece of the prefix's metadata proves it was written
// with this user's key.
type Trust int

const (
	// Forged: its MAC does not verify: written with another key, or
	// changed since. Never used. The zero value: nothing is trusted
	// before it is checked.
	Forged Trust = iota
	// Unsigned: it has no MAC, as written by scrfs before it signed the
	// prefix. Used only with Config.TrustUnsigned.
	Unsigned
	// Verified: its MAC verifies under the key.
	Verified
)

func (t Trust) String() string {
	switch t {
	case Verified:
		return "verified"
	case Unsigned:
		return "unsigned"
	}
	return "MAC fails"
}

// ErrUnverified is wrapped by the errors of metadata refused for its MAC
// (a Forged one, or an Unsigned one without Config.TrustUnsigned).
var ErrUnverified = errors.New("not signed with this user's prefix key")

// macDomain starts every MAC input, so that a MAC of this format can never
// be taken for one of anything else the key might sign.
const macDomain = "scrfs-prefix-mac-v1\x00"

// The kinds of signed things: a MAC of one kind never verifies another.
const (
	kindPart     = "part"
	kindManifest = "manifest"
	kindEntry    = "index-entry"
	kindCurrent  = "index-current"
)

// macKey is the HMAC key; nil verifies nothing and signs nothing.
type macKey []byte

// sum returns the hex MAC of data as a thing of kind.
func (k macKey) sum(kind string, data []byte) string {
	m := hmac.New(sha256.New, k)
	m.Write([]byte(macDomain))
	m.Write([]byte(kind))
	m.Write([]byte{0})
	m.Write(data)
	return hex.EncodeToString(m.Sum(nil))
}

// check returns the trust of data with MAC mac ("" = none).
func (k macKey) check(kind string, data []byte, mac string) Trust {
	switch {
	case mac == "":
		return Unsigned
	case k == nil:
		return Forged
	case hmac.Equal([]byte(k.sum(kind, data)), []byte(mac)):
		return Verified
	}
	return Forged
}

// errNoKey: signing needs the key.
var errNoKey = errors.New("no prefix key to sign with (prefix.key_file)")

// A signed document (a part or a manifest) is its JSON object with a last
// member "mac", computed over every byte before it:
//
//	{"version":1,…,"entries":[…],"mac":"<64 hex digits>"}
//
// so the MAC covers the file exactly as written, fields a later version
// adds included, and the reader needs no canonical form.
const macMember = `,"mac":"`

// seal appends the MAC member to body, an encoded JSON object without its
// closing brace.
func (k macKey) seal(kind string, body []byte) ([]byte, error) {
	if k == nil {
		return nil, errNoKey
	}
	out := make([]byte, 0, len(body)+len(macMember)+64+3)
	out = append(out, body...)
	out = append(out, macMember...)
	out = append(out, k.sum(kind, body)...)
	return append(out, "\"}\n"...), nil
}

// open returns the trust of a document: Unsigned when it does not end in
// a MAC member, else whether the MAC verifies over what precedes it.
func (k macKey) open(kind string, doc []byte) Trust {
	d := bytes.TrimRight(doc, "\n")
	const tail = len(macMember) + 64 + 2 // `,"mac":"` hex `"}`
	if len(d) < tail || !bytes.HasSuffix(d, []byte(`"}`)) || !bytes.Equal(d[len(d)-tail:len(d)-tail+len(macMember)], []byte(macMember)) {
		return Unsigned
	}
	mac := d[len(d)-tail+len(macMember) : len(d)-2]
	if _, err := hex.DecodeString(string(mac)); err != nil {
		return Forged
	}
	return k.check(kind, d[:len(d)-tail], string(mac))
}

// digest returns the hex SHA-256 of b: how an index entry names the exact
// manifest it completed, and a manifest the record beside it.
func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// refusal explains refused metadata: where, and what to do.
func refusal(what, where string, t Trust) error {
	if t == Unsigned {
		return fmt.Errorf("%w: %s %s has no MAC (written before scrfs signed the prefix, or by someone else); "+
			"set prefix.trust_unsigned = true to use a prefix you know was not tampered with", ErrUnverified, what, where)
	}
	return fmt.Errorf("%w: the MAC of %s %s does not verify: it was written with another key (every node and "+
		"every run needs the same prefix.key_file) or changed since", ErrUnverified, what, where)
}
