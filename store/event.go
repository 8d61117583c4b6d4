package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Event is one entry of the chain. Append fills Seq, Time, Prev and Hash; the
// caller sets Session, Branch, Type, Actor and Payload.
//
// The zero Event is not appendable: Session and Type are required.
type Event struct {
	Seq     uint64          `json:"seq"`     // global, gapless, from 1
	Time    time.Time       `json:"time"`    // set by Append (UTC, from Options.Now)
	Session string          `json:"session"` // required; no NUL byte, at most MaxSessionLen bytes
	Branch  int             `json:"branch"`  // set by the caller (agentcore); 0 is the first branch
	Type    string          `json:"type"`    // e.g. "user_message", "gate_decision"; required
	Actor   string          `json:"actor"`   // who caused it: "user:alice", "model", "bot", "system"
	Payload json.RawMessage `json:"payload"` // JSON; nil is stored as null; compacted, capped
	Prev    string          `json:"prev"`    // hex SHA-256 of the previous event; 64 zeros for seq 1
	Hash    string          `json:"hash"`    // hex SHA-256 of this event's canonical body
}

// MaxSessionLen is the longest session id Append accepts, in bytes.
const MaxSessionLen = 1024

// ZeroHash is the Prev of the first event (seq 1): 64 ASCII zeros.
const ZeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// hashSuffixLen is len(`,"hash":"` + 64 hex + `"}`).
const hashSuffixLen = 9 + 64 + 2

// validate checks the caller-set fields of ev and normalises its payload to
// the stored form (compact JSON, capped at payloadCap bytes).
func validate(ev *Event, payloadCap int) error {
	switch {
	case ev.Session == "":
		return errors.New("session is empty")
	case len(ev.Session) > MaxSessionLen:
		return fmt.Errorf("session id is %d bytes, more than %d", len(ev.Session), MaxSessionLen)
	case strings.IndexByte(ev.Session, 0) >= 0:
		return errors.New("session id contains a NUL byte")
	case ev.Type == "":
		return errors.New("type is empty")
	case ev.Branch < 0:
		return fmt.Errorf("branch %d is negative", ev.Branch)
	case !utf8.ValidString(ev.Session) || !utf8.ValidString(ev.Type) || !utf8.ValidString(ev.Actor):
		return errors.New("session, type or actor is not valid UTF-8")
	}
	p, err := storedPayload(ev.Payload, payloadCap)
	if err != nil {
		return err
	}
	ev.Payload = p
	return nil
}

// storedPayload returns p compacted, "null" for an empty p, and the capped
// marker when the compacted form is longer than payloadCap.
func storedPayload(p json.RawMessage, payloadCap int) (json.RawMessage, error) {
	if len(p) == 0 {
		return json.RawMessage("null"), nil
	}
	if !utf8.Valid(p) {
		return nil, errors.New("payload is not valid UTF-8")
	}
	var buf bytes.Buffer
	buf.Grow(len(p))
	if err := json.Compact(&buf, p); err != nil {
		return nil, fmt.Errorf("payload is not valid JSON: %w", err)
	}
	if buf.Len() <= payloadCap {
		return buf.Bytes(), nil
	}
	return capPayload(buf.Bytes(), payloadCap), nil
}

// CappedPayload is the content of the marker that replaces a payload longer
// than Options.PayloadCap. Its stored shape is exactly
//
//	{"capped":{"size":N,"sha256":"HEX","head":"TEXT","tail":"TEXT"}}
//
// where N is the length in bytes of the original (compacted) JSON payload,
// HEX the hex SHA-256 of those bytes, and head and tail are its first and last
// bytes (cut at UTF-8 boundaries) as JSON strings.
type CappedPayload struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Head   string `json:"head"`
	Tail   string `json:"tail"`
}

// Capped reports whether p is the capped-payload marker and returns its
// content. It is a pure function and may be called concurrently.
func Capped(p json.RawMessage) (CappedPayload, bool) {
	if !bytes.HasPrefix(p, []byte(`{"capped":{`)) {
		return CappedPayload{}, false
	}
	var m struct {
		Capped *CappedPayload `json:"capped"`
	}
	if err := json.Unmarshal(p, &m); err != nil || m.Capped == nil {
		return CappedPayload{}, false
	}
	return *m.Capped, true
}

// capPayload builds the marker for p, shrinking head and tail until the marker
// fits in payloadCap bytes (escaping can make it longer than the raw text).
func capPayload(p []byte, payloadCap int) json.RawMessage {
	sum := sha256.Sum256(p)
	keep := (payloadCap - 160) / 2
	for {
		head := p[:keep]
		for len(head) > 0 && !utf8.Valid(head) {
			head = head[:len(head)-1]
		}
		tail := p[len(p)-keep:]
		for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
		}
		out := make([]byte, 0, payloadCap)
		out = append(out, `{"capped":{"size":`...)
		out = strconv.AppendInt(out, int64(len(p)), 10)
		out = append(out, `,"sha256":"`...)
		out = hex.AppendEncode(out, sum[:])
		out = append(out, `","head":`...)
		out = appendString(out, string(head))
		out = append(out, `,"tail":`...)
		out = appendString(out, string(tail))
		out = append(out, "}}"...)
		if len(out) <= payloadCap || keep == 0 {
			return out
		}
		keep = keep * 3 / 4
	}
}

// appendBody appends the canonical body of ev (everything but the hash, see
// the package documentation) to dst.
func appendBody(dst []byte, ev *Event) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, ev.Seq, 10)
	dst = append(dst, `,"time":"`...)
	dst = ev.Time.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","session":`...)
	dst = appendString(dst, ev.Session)
	dst = append(dst, `,"branch":`...)
	dst = strconv.AppendInt(dst, int64(ev.Branch), 10)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, ev.Type)
	dst = append(dst, `,"actor":`...)
	dst = appendString(dst, ev.Actor)
	dst = append(dst, `,"payload":`...)
	if len(ev.Payload) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, ev.Payload...)
	}
	dst = append(dst, `,"prev":"`...)
	dst = append(dst, ev.Prev...)
	return append(dst, `"}`...)
}

// encodeLine returns the stored line of ev (canonical body with the hash
// spliced in before the closing brace, no newline) and the hash.
func encodeLine(ev *Event) ([]byte, string) {
	line := appendBody(make([]byte, 0, 256+len(ev.Payload)+len(ev.Session)), ev)
	sum := sha256.Sum256(line)
	h := hex.EncodeToString(sum[:])
	line = line[:len(line)-1]
	line = append(line, `,"hash":"`...)
	line = append(line, h...)
	return append(line, `"}`...), h
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string with the same escapes as Python's
// json.dumps(s, ensure_ascii=False): \" \\ \b \f \n \r \t, other control
// characters below 0x20 as \u00xx, everything else verbatim.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// wireEvent is the decoding shape of a stored line.
type wireEvent struct {
	Seq     uint64          `json:"seq"`
	Time    string          `json:"time"`
	Session string          `json:"session"`
	Branch  int             `json:"branch"`
	Type    string          `json:"type"`
	Actor   string          `json:"actor"`
	Payload json.RawMessage `json:"payload"`
	Prev    string          `json:"prev"`
	Hash    string          `json:"hash"`
}

// decodeLine parses a stored line without checking its hash.
func decodeLine(line []byte) (Event, error) {
	var w wireEvent
	if err := json.Unmarshal(line, &w); err != nil {
		return Event{}, fmt.Errorf("not a JSON event: %w", err)
	}
	t, err := time.Parse(time.RFC3339Nano, w.Time)
	if err != nil {
		return Event{}, fmt.Errorf("bad time %q", w.Time)
	}
	return Event{
		Seq: w.Seq, Time: t, Session: w.Session, Branch: w.Branch, Type: w.Type,
		Actor: w.Actor, Payload: w.Payload, Prev: w.Prev, Hash: w.Hash,
	}, nil
}

// parseLine parses a stored line and checks that it is in canonical form and
// that its hash matches its body. The returned error text says what is wrong.
func parseLine(line []byte) (Event, error) {
	n := len(line)
	if n < hashSuffixLen+2 || !bytes.Equal(line[n-hashSuffixLen:n-hashSuffixLen+9], []byte(`,"hash":"`)) ||
		!bytes.Equal(line[n-2:], []byte(`"}`)) {
		return Event{}, errors.New("line does not end with the hash field")
	}
	ev, ok := decodeCanonical(line)
	if !ok {
		var err error
		if ev, err = decodeLine(line); err != nil {
			return Event{}, err
		}
	}
	if !isHex64(ev.Hash) || ev.Hash != string(line[n-hashSuffixLen+9:n-2]) {
		return Event{}, errors.New("malformed hash field")
	}
	if !isHex64(ev.Prev) {
		return Event{}, errors.New("malformed prev field")
	}
	body := appendBody(make([]byte, 0, n), &ev)
	if !bytes.Equal(body[:len(body)-1], line[:n-hashSuffixLen]) {
		return ev, errors.New("event is not in canonical form")
	}
	sum := sha256.Sum256(body)
	if h := hex.EncodeToString(sum[:]); h != ev.Hash {
		return ev, fmt.Errorf("hash mismatch: recorded %.12s…, body hashes to %.12s…", ev.Hash, h)
	}
	return ev, nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodeCanonical is decodeLine for a line laid out as appendBody writes
// it, with plain strings (no escapes, no control characters, valid UTF-8):
// what nearly every stored line is. It reads the fields where the layout
// puts them instead of running a JSON decoder over the line (verification
// of a long chain spends most of its time there), and checks the payload
// with json.Valid. ok is false for anything else, which decodeLine then
// reads; on a line it accepts it returns what decodeLine returns
// (FuzzDecodeCanonical checks that). parseLine's canonical re-encoding and
// hash checks follow either way.
func decodeCanonical(line []byte) (ev Event, ok bool) {
	return decodeFields(line, true)
}

// decodeFields is decodeCanonical; without checkPayload it takes the
// payload's bytes unchecked (they are the bytes between the actor and the
// fixed-length tail either way): for building an index, whose reader
// decodes the few payloads it needs, and where verification, not the index,
// says whether the chain is sound.
func decodeFields(line []byte, checkPayload bool) (ev Event, ok bool) {
	const tail = len(`,"prev":"`) + 64 + 1 + hashSuffixLen // after the payload
	n := len(line)
	if n < tail+2 || string(line[n-tail:n-tail+9]) != `,"prev":"` || line[n-hashSuffixLen-1] != '"' {
		return Event{}, false
	}
	rest := line[:n-tail]
	lit := func(s string) bool {
		if len(rest) < len(s) || string(rest[:len(s)]) != s {
			return false
		}
		rest = rest[len(s):]
		return true
	}
	digits := func() (uint64, bool) {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 || i > 19 {
			return 0, false
		}
		v, err := strconv.ParseUint(string(rest[:i]), 10, 64)
		rest = rest[i:]
		return v, err == nil
	}
	str := func() (string, bool) {
		if len(rest) == 0 || rest[0] != '"' {
			return "", false
		}
		for i := 1; i < len(rest); i++ {
			switch c := rest[i]; {
			case c == '"':
				v := rest[1:i]
				rest = rest[i+1:]
				return string(v), utf8.Valid(v)
			case c == '\\' || c < 0x20:
				return "", false
			}
		}
		return "", false
	}
	var ok1, ok2, ok3, ok4 bool
	if !lit(`{"seq":`) {
		return Event{}, false
	}
	if ev.Seq, ok1 = digits(); !ok1 || !lit(`,"time":`) {
		return Event{}, false
	}
	ts, ok2 := str()
	if !ok2 || !lit(`,"session":`) {
		return Event{}, false
	}
	var err error
	if ev.Time, err = time.Parse(time.RFC3339Nano, ts); err != nil {
		return Event{}, false
	}
	if ev.Session, ok3 = str(); !ok3 || !lit(`,"branch":`) {
		return Event{}, false
	}
	b, ok4 := digits()
	if !ok4 || b > math.MaxInt32 || !lit(`,"type":`) {
		return Event{}, false
	}
	ev.Branch = int(b)
	if ev.Type, ok = str(); !ok || !lit(`,"actor":`) {
		return Event{}, false
	}
	if ev.Actor, ok = str(); !ok || !lit(`,"payload":`) {
		return Event{}, false
	}
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	if len(rest) == 0 || space(rest[0]) || space(rest[len(rest)-1]) || checkPayload && !json.Valid(rest) {
		return Event{}, false
	}
	ev.Payload = json.RawMessage(bytes.Clone(rest))
	ev.Prev = string(line[n-tail+9 : n-tail+9+64])
	ev.Hash = string(line[n-hashSuffixLen+9 : n-2])
	return ev, true
}
