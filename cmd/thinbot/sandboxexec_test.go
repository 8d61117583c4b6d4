package main

import (
	"bytes"
	"testing"

	"github.com/thinbot/thinbot/agentcore/fleet"
)

// FuzzMarkerToStderr: however the writes cut it, fleet's start marker at
// the start of the stream goes to stderr, and every other byte to stdout
// in order.
func FuzzMarkerToStderr(f *testing.F) {
	f.Add([]byte(fleet.StartMarker+"out\n"), uint8(3))
	f.Add([]byte("no marker"), uint8(1))
	f.Add([]byte(fleet.StartMarker[:4]), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, cut uint8) {
		var out, errb bytes.Buffer
		m := &markerToStderr{stdout: &out, stderr: &errb}
		c := min(int(cut), len(in))
		m.Write(in[:c])
		m.Write(in[c:])
		m.flush()
		if bytes.HasPrefix(in, []byte(fleet.StartMarker)) {
			if errb.String() != fleet.StartMarker || !bytes.Equal(out.Bytes(), in[len(fleet.StartMarker):]) {
				t.Fatalf("marker: stdout %q stderr %q", out.Bytes(), errb.Bytes())
			}
		} else if errb.Len() != 0 || !bytes.Equal(out.Bytes(), in) {
			t.Fatalf("no marker: stdout %q stderr %q", out.Bytes(), errb.Bytes())
		}
	})
}
