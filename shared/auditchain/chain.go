// Package auditchain makes the audit trail prove itself. Each writer (an
// `aegis serve` process, a Lambda execution environment, an `aegis wrap`
// run) keeps, per tenant, a sequence and a hash chain over the records it
// writes: the chain's fields ride in the record itself (audit.Record's
// Writer, Seq, Prev, Hash), so chaining adds no store item and no round
// trip to a call. Every DefaultRecords records or DefaultInterval, off
// the call's path, the writer signs a checkpoint (the head of its chain,
// naming the previous checkpoint) with a key it cannot export (KMS on
// Lambda, a local Ed25519 key elsewhere) and stores it beside the
// records. Verify checks a tenant's records and checkpoints with only the
// public keys, and names each fault; docs/design/audit.md is the threat
// model and the formats.
package auditchain

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/aegis-gw/aegis/shared/audit"
)

// Genesis is the Prev of a chain's first record.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// linkTag separates the record hash from every other SHA-256 we take.
const linkTag = "aegis.audit/v1 record\n"

// Digest is the SHA-256 of r's canonical form: r as stored (the caller
// passes the bounded record), its time in UTC, its degraded list sorted
// (DynamoDB keeps it as a set), its chain fields left out, encoded as
// JSON with object keys sorted (audit.Canonical).
func Digest(r audit.Record) ([sha256.Size]byte, error) {
	r.Writer, r.Seq, r.Prev, r.Hash = "", 0, "", ""
	r.Time = r.Time.UTC()
	if !slices.IsSorted(r.Degraded) {
		r.Degraded = slices.Sorted(slices.Values(r.Degraded))
	}
	return DigestJSON(r)
}

// DigestJSON is the SHA-256 of v's JSON with object keys sorted
// (audit.Canonical): the content digest of a line that is not an
// audit.Record (aegis wrap's), whose owner clears its chain fields first.
func DigestJSON(v any) ([sha256.Size]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	c, err := audit.Canonical(b)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(c), nil
}

// Link is the hash of the record with content digest d at seq in writer's
// chain after the record hashed prev: SHA-256 of a fixed tag, the writer
// id and a newline, seq as 8 bytes big-endian, prev and d.
func Link(writer string, seq uint64, prev, d [sha256.Size]byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(linkTag))
	h.Write([]byte(writer))
	h.Write([]byte{'\n'})
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], seq)
	h.Write(n[:])
	h.Write(prev[:])
	h.Write(d[:])
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// RecordHash recomputes r's hash from its content and its chain fields
// Writer and Prev, at position seq (r.Seq for the position it claims).
func RecordHash(r audit.Record, seq uint64) (string, error) {
	prev, err := parseHash(r.Prev)
	if err != nil {
		return "", fmt.Errorf("prev: %w", err)
	}
	d, err := Digest(r)
	if err != nil {
		return "", err
	}
	h := Link(r.Writer, seq, prev, d)
	return hex.EncodeToString(h[:]), nil
}

// Chained reports whether r carries chain fields.
func Chained(r audit.Record) bool { return r.Writer != "" || r.Seq != 0 || r.Hash != "" }

func parseHash(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	if len(s) != 2*sha256.Size || !audit.IsHash(s) {
		return h, errors.New("not a hex SHA-256")
	}
	_, err := hex.Decode(h[:], []byte(s))
	return h, err
}
