package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxSSELine caps one SSE line (and one event's data), so a broken or
// hostile server cannot make the client buffer without limit.
const maxSSELine = 8 << 20

// sseEvent is one server-sent event.
type sseEvent struct {
	Event string // the event: field, "" for the default "message"
	Data  []byte // data: lines joined with "\n"; valid until the next call to next
}

// sseReader reads server-sent events as model servers send them. Beyond the
// SSE format (comment lines such as keep-alives, blank lines, CRLF, "data:"
// with or without a space) it copes with servers that put several data:
// lines in a row without the blank line between events: a data line that
// starts a new JSON value after a complete one starts a new event.
type sseReader struct {
	r       *bufio.Reader
	event   string
	data    []byte
	hasData bool
	pending []byte // a data line that belongs to the next event
	hasPend bool
	line    []byte
	out     []byte
}

// answerBuffer is the size of the buffer an answer is read through.
const answerBuffer = 16 << 10

// newSSEReader reads r through a buffer of answerBuffer bytes; r itself
// when it is such a buffer.
func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, answerBuffer)}
}

// next returns the next event. At the end of the stream it returns io.EOF;
// if the stream stops inside an event whose data is incomplete it returns
// io.ErrUnexpectedEOF; read errors are returned as they are.
func (s *sseReader) next() (sseEvent, error) {
	if s.hasPend {
		s.data = append(s.data[:0], s.pending...)
		s.hasData, s.hasPend = true, false
	}
	for {
		line, err := s.readLine()
		if err != nil {
			if s.hasData {
				if errors.Is(err, io.EOF) && complete(s.data) {
					return s.take(), nil
				}
				if errors.Is(err, io.EOF) {
					return sseEvent{}, io.ErrUnexpectedEOF
				}
			}
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if s.hasData {
				return s.take(), nil
			}
			s.event = ""
			continue
		}
		if line[0] == ':' {
			continue // comment: keep-alive
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			s.event = string(value)
		case "data":
			if s.hasData && startsValue(value) && complete(s.data) {
				s.pending = append(s.pending[:0], value...)
				s.hasPend = true
				return s.take(), nil
			}
			if s.hasData {
				if len(s.data)+1+len(value) > maxSSELine {
					return sseEvent{}, fmt.Errorf("sse event longer than %d bytes", maxSSELine)
				}
				s.data = append(s.data, '\n')
			} else {
				s.data = s.data[:0]
			}
			s.data = append(s.data, value...)
			s.hasData = true
		}
		// id:, retry: and unknown fields are ignored, as the format says.
	}
}

func (s *sseReader) take() sseEvent {
	s.out = append(s.out[:0], s.data...)
	ev := sseEvent{Event: s.event, Data: s.out}
	s.event, s.hasData, s.data = "", false, s.data[:0]
	return ev
}

// startsValue reports whether a data line starts a JSON object or [DONE].
func startsValue(v []byte) bool {
	return len(v) > 0 && (v[0] == '{' || bytes.Equal(v, doneMarker))
}

// complete reports whether data is a whole event payload.
func complete(data []byte) bool {
	return bytes.Equal(data, doneMarker) || json.Valid(data)
}

var doneMarker = []byte("[DONE]")

// readLine returns one line without its line ending (LF, CRLF or a final
// line without one). The returned slice is valid until the next call.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(s.line)+len(chunk) > maxSSELine {
			return nil, fmt.Errorf("sse line longer than %d bytes", maxSSELine)
		}
		if err == nil {
			if len(s.line) == 0 {
				return trimEOL(chunk), nil // fast path: no copy
			}
			s.line = append(s.line, chunk...)
			return trimEOL(s.line), nil
		}
		s.line = append(s.line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(s.line) > 0 {
			// A last line without a newline: the server closed right after
			// it. Return it now; the next read reports EOF.
			return trimEOL(s.line), nil
		}
		return nil, err
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}
