package fom

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// parseTag splits a struct tag into its key:"value" pairs, in order.
func parseTag(tag string) ([][2]string, error) {
	var out [][2]string
	for tag = strings.TrimSpace(tag); tag != ""; tag = strings.TrimSpace(tag) {
		i := strings.IndexByte(tag, ':')
		if i <= 0 || i+1 >= len(tag) || tag[i+1] != '"' {
			return out, fmt.Errorf("malformed tag near %q: want key:\"value\" pairs", tag)
		}
		key := tag[:i]
		if strings.ContainsAny(key, " \t\"") {
			return out, fmt.Errorf("malformed tag key %q", key)
		}
		rest := tag[i+1:]
		j := 1
		for j < len(rest) && rest[j] != '"' {
			if rest[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(rest) {
			return out, fmt.Errorf("unterminated value of tag key %q", key)
		}
		val, err := strconv.Unquote(rest[:j+1])
		if err != nil {
			return out, fmt.Errorf("bad value of tag key %q: %v", key, err)
		}
		out = append(out, [2]string{key, val})
		tag = rest[j+1:]
	}
	return out, nil
}

// expandEnv replaces ${NAME} and ${NAME:default}. A variable that is unset
// and has no default is an error rather than an empty string.
func expandEnv(s string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unterminated ${ in %q", s)
		}
		b.WriteString(s[:i])
		ref := s[i+2 : i+j]
		name, def, hasDef := strings.Cut(ref, ":")
		if name == "" {
			return "", fmt.Errorf("empty variable name in %q", s)
		}
		v, ok := os.LookupEnv(name)
		switch {
		case ok:
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			return "", fmt.Errorf("environment variable %s is not set and has no default (write ${%s:default})", name, name)
		}
		s = s[i+j+1:]
	}
}
