package openai

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(r io.Reader) ([]sseEvent, error) {
	s := newSSEReader(r)
	var evs []sseEvent
	for {
		ev, err := s.next()
		if err != nil {
			return evs, err
		}
		ev.Data = bytes.Clone(ev.Data)
		evs = append(evs, ev)
	}
}

func TestSSE(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // event:data
		err  error
	}{
		{"basic", "data: a\n\ndata: b\n\n", []string{":a", ":b"}, io.EOF},
		{"crlf and comments", ": hi\r\n\r\ndata:x\r\n\r\n", []string{":x"}, io.EOF},
		{"multi-line data", "data: {\"a\":\ndata: 1}\n\n", []string{":{\"a\":\n1}"}, io.EOF},
		{"event field", "event: error\ndata: {}\n\ndata: {}\n\n", []string{"error:{}", ":{}"}, io.EOF},
		{"no blank lines between json", "data: {}\ndata: {\"b\":1}\ndata: [DONE]\n", []string{":{}", ":{\"b\":1}", ":[DONE]"}, io.EOF},
		{"last line without newline", "data: [DONE]", []string{":[DONE]"}, io.EOF},
		{"cut inside json", "data: {\"a\":1}\n\ndata: {\"b\"", []string{":{\"a\":1}"}, io.ErrUnexpectedEOF},
		{"blank lines only", "\n\n\r\n", nil, io.EOF},
		{"field without colon", "data\n\n", []string{":"}, io.EOF},
		{"ignored fields", "id: 1\nretry: 5\nfoo: bar\ndata: z\n\n", []string{":z"}, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				evs, err := readAll(r)
				var got []string
				for _, e := range evs {
					got = append(got, e.Event+":"+string(e.Data))
				}
				if strings.Join(got, "|") != strings.Join(tt.want, "|") || !errors.Is(err, tt.err) {
					t.Errorf("events %q, err %v; want %q, %v", got, err, tt.want, tt.err)
				}
			}
		})
	}
}

func TestSSELineLimit(t *testing.T) {
	in := io.MultiReader(strings.NewReader("data: "), &repeatReader{b: 'x', n: maxSSELine + 10})
	_, err := readAll(in)
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("err = %v, want a line-length error", err)
	}
}

type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n)
	for i := range n {
		p[i] = r.b
	}
	r.n -= n
	return n, nil
}

// FuzzSSE checks that the SSE reader never panics, always terminates, and
// gives the same events whether the input arrives at once or byte by byte.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n",
		": keep-alive\r\n\r\ndata:{}\r\n\r\n",
		"data: {}\ndata: {}\ndata: [DONE]",
		"event: error\ndata: {\"error\":{\"message\":\"x\"}}\n\n",
		"data: {\"a\":\ndata: 1}\n\n",
		"data: {\"cut",
		"\n\n\n",
		"data",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		whole, err1 := readAll(strings.NewReader(in))
		bytewise, err2 := readAll(iotest.OneByteReader(strings.NewReader(in)))
		if len(whole) != len(bytewise) || !errors.Is(err2, err1) && err1 != err2 {
			t.Fatalf("whole %d events (%v), bytewise %d (%v)", len(whole), err1, len(bytewise), err2)
		}
		for i := range whole {
			if whole[i].Event != bytewise[i].Event || !bytes.Equal(whole[i].Data, bytewise[i].Data) {
				t.Fatalf("event %d differs: %q vs %q", i, whole[i].Data, bytewise[i].Data)
			}
		}
		if len(whole) > len(in)+1 {
			t.Fatalf("%d events from %d bytes", len(whole), len(in))
		}
	})
}
