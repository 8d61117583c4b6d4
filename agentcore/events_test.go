package agentcore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strconv"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/store"
)

// TestDecodeKnowsEveryType: every Ev constant the package declares has a
// payload type in Decode, so that a new event type cannot be added without
// its place in the schema. The constants are read from the source, not
// from a list that could be forgotten as well.
func TestDecodeKnowsEveryType(t *testing.T) {
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range pkgs["agentcore"].Files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Ev") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					typ, _ := strconv.Unquote(lit.Value)
					n++
					p, err := Decode(store.Event{Type: typ, Payload: []byte(`{}`)})
					if err != nil || p == nil {
						t.Errorf("Decode(%s %q) = %v, %v; want its payload type", name.Name, typ, p, err)
					}
				}
			}
		}
	}
	if n < 17 {
		t.Errorf("found %d Ev constants; the parse missed some", n)
	}
	if p, err := Decode(store.Event{Type: "from_a_newer_thinbot", Payload: []byte(`{}`)}); p != nil || err != nil {
		t.Errorf("Decode(unknown type) = %v, %v; want nil, nil (skipped)", p, err)
	}
	if _, err := Decode(store.Event{Type: EvToolResult, Payload: []byte(`{"call_id":1}`)}); err == nil {
		t.Error("Decode of a payload that does not decode gave no error")
	}
}
