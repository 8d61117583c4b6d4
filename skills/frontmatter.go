package skills

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Errors ParseFrontmatter returns (wrapped); callers check with errors.Is.
var (
	// ErrNoFrontmatter is returned when SKILL.md does not start with a "---" line.
	ErrNoFrontmatter = errors.New("no frontmatter: SKILL.md must start with a --- line")
	// ErrUnclosedFrontmatter is returned when no "---" line closes the frontmatter.
	ErrUnclosedFrontmatter = errors.New("frontmatter is never closed by a --- line")
	// ErrInvalidFrontmatter is returned when the frontmatter is neither valid
	// YAML nor readable line by line as "key: value", or is not a mapping.
	ErrInvalidFrontmatter = errors.New("invalid frontmatter")
)

// maxYAMLNodes bounds the work of converting a YAML tree (aliases can make a
// small document expand exponentially).
const maxYAMLNodes = 20000

// ParseFrontmatter splits a SKILL.md into its frontmatter, decoded as a map,
// and the Markdown body after the closing "---" line.
//
// It accepts a UTF-8 byte order mark and CRLF line ends (the body is returned
// with LF line ends). The opening line must be "---" and the closing one is
// the first later line that is exactly "---" (trailing spaces allowed), so a
// "---" rule inside the body stays in the body. When the frontmatter is not
// valid YAML (most often an unquoted ": " inside a description), it is read
// again line by line as top-level "key: value" entries; only when that fails
// too is ErrInvalidFrontmatter returned. Nested values decode as
// map[string]any and []any; YAML floats stay strings ("3.10" is not 3.1).
//
// ParseFrontmatter never panics and does work linear in len(data).
func ParseFrontmatter(data []byte) (fm map[string]any, body string, err error) {
	fm, body, _, err = parseFrontmatter(data)
	return fm, body, err
}

// parseFrontmatter is ParseFrontmatter plus the warnings a loader reports
// (line-by-line recovery, duplicate keys).
func parseFrontmatter(data []byte) (fm map[string]any, body string, warnings []string, err error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	first, rest, _ := strings.Cut(text, "\n")
	if strings.TrimRight(first, " \t\r") != "---" {
		return nil, "", nil, ErrNoFrontmatter
	}
	var front string
	closed := false
	for off := 0; off <= len(rest); {
		line, _, more := strings.Cut(rest[off:], "\n")
		if strings.TrimRight(line, " \t\r") == "---" {
			front = rest[:off]
			if more {
				body = rest[off+len(line)+1:]
			}
			closed = true
			break
		}
		if !more {
			break
		}
		off += len(line) + 1
	}
	if !closed {
		return nil, "", nil, ErrUnclosedFrontmatter
	}
	fm, warnings, err = decodeYAML(front)
	if err != nil {
		var ok bool
		fm, warnings, ok = decodeLines(front)
		if !ok {
			return nil, "", nil, fmt.Errorf("%w: %v", ErrInvalidFrontmatter, err)
		}
		warnings = append([]string{"frontmatter is not valid YAML (" + shortYAMLError(err) + "); read line by line"}, warnings...)
	}
	return fm, body, warnings, nil
}

// shortYAMLError removes the "yaml: " prefix for a compact message.
func shortYAMLError(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// decodeYAML decodes a frontmatter document that must be a mapping (or empty).
func decodeYAML(front string) (map[string]any, []string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(front), &doc); err != nil {
		return nil, nil, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return map[string]any{}, nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return map[string]any{}, nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, nil, errors.New("frontmatter is not a mapping")
	}
	c := converter{}
	v, err := c.convert(root)
	if err != nil {
		return nil, nil, err
	}
	return v.(map[string]any), c.warnings, nil
}

// converter turns a yaml.Node tree into plain Go values, bounded in size.
type converter struct {
	nodes    int
	depth    int
	warnings []string
}

func (c *converter) convert(n *yaml.Node) (any, error) {
	c.nodes++
	if c.nodes > maxYAMLNodes {
		return nil, errors.New("frontmatter too complex")
	}
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > 64 {
		return nil, errors.New("frontmatter nested too deeply")
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, nil
		}
		return c.convert(n.Alias)
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.convert(n.Content[0])
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, item := range n.Content {
			v, err := c.convert(item)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			kv, err := c.convert(n.Content[i])
			if err != nil {
				return nil, err
			}
			k := fmt.Sprint(kv)
			if kv == nil {
				k = n.Content[i].Value
			}
			v, err := c.convert(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			if _, dup := out[k]; dup && c.depth == 1 {
				c.warnings = append(c.warnings, fmt.Sprintf("duplicate key %q: the last one is used", k))
			}
			out[k] = v
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str", "!!float", "!!binary", "!!timestamp":
			// Floats and timestamps stay text: "python: 3.10" means 3.10.
			return n.Value, nil
		case "!!null":
			return nil, nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return n.Value, nil
		}
		return v, nil
	}
	return nil, nil
}

// keyLine matches a top-level "key: value" or "key:" line.
var keyLine = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*)|[ \t]*)$`)

// decodeLines is the fallback reader for frontmatter that is not valid YAML.
// It splits the text into top-level entries (a "key:" line at column 0 plus
// its indented continuation lines). An entry that is valid YAML on its own
// keeps its structure; otherwise its value is taken as plain text, with
// continuation lines joined by spaces and one pair of quotes removed. It fails
// when a non-blank, non-comment line at column 0 is not a "key:" line.
func decodeLines(front string) (map[string]any, []string, bool) {
	type entry struct {
		key   string
		lines []string
	}
	var entries []entry
	for line := range strings.SplitSeq(front, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			if len(entries) > 0 {
				entries[len(entries)-1].lines = append(entries[len(entries)-1].lines, line)
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if len(entries) == 0 {
				return nil, nil, false
			}
			entries[len(entries)-1].lines = append(entries[len(entries)-1].lines, line)
			continue
		}
		m := keyLine.FindStringSubmatch(line)
		if m == nil {
			return nil, nil, false
		}
		entries = append(entries, entry{key: m[1], lines: []string{line}})
	}
	if len(entries) == 0 {
		return nil, nil, false
	}
	out := make(map[string]any, len(entries))
	var warnings []string
	for _, e := range entries {
		if _, dup := out[e.key]; dup {
			warnings = append(warnings, fmt.Sprintf("duplicate key %q: the last one is used", e.key))
		}
		if m, _, err := decodeYAML(strings.Join(e.lines, "\n")); err == nil {
			if v, ok := m[e.key]; ok && len(m) == 1 {
				out[e.key] = v
				continue
			}
		}
		out[e.key] = plainValue(e.lines)
	}
	return out, warnings, true
}

// plainValue reads an entry's value as text: the rest of the key line plus
// its continuation lines, whitespace-joined; a block-scalar indicator is
// dropped and one pair of matching quotes removed.
func plainValue(lines []string) string {
	_, first, _ := strings.Cut(lines[0], ":")
	first = strings.TrimSpace(first)
	switch first {
	case "|", "|-", "|+", ">", ">-", ">+":
		first = ""
	}
	parts := []string{first}
	for _, l := range lines[1:] {
		if t := strings.TrimSpace(l); t != "" {
			parts = append(parts, t)
		}
	}
	v := strings.TrimSpace(strings.Join(parts, " "))
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		v = v[1 : len(v)-1]
	}
	return v
}
