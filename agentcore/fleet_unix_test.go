package agentcore

import (
	"os"
	"os/user"
	"strconv"
	"syscall"
	"testing"
)

func fileUID(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

func lookupUID(t *testing.T, name string) int {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(u.Uid)
	return n
}
