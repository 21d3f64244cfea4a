package policy

import (
	"fmt"
	"strings"
	"unicode"
)

// pattern is a compiled "server/name" pattern: the text before the first
// "/" matches the server, the rest the name (a tool, a prompt, or a
// resource URI, which may itself hold "/"). "*" matches any run of
// characters, none included; every other character matches itself.
type pattern struct {
	src          string
	server, name string
}

// compilePattern checks and compiles src.
func compilePattern(src string) (pattern, error) {
	server, name, ok := strings.Cut(src, "/")
	switch {
	case !ok:
		return pattern{}, fmt.Errorf("pattern %q: want server/name (use */* for everything)", src)
	case server == "" || name == "":
		return pattern{}, fmt.Errorf("pattern %q: empty server or name (use * to match any)", src)
	}
	for _, r := range src {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return pattern{}, fmt.Errorf("pattern %q: holds a space, control or invalid character", src)
		}
	}
	return pattern{src: src, server: server, name: name}, nil
}

// match reports whether the pattern matches name on server.
func (p pattern) match(server, name string) bool {
	return glob(p.server, server) && glob(p.name, name)
}

// glob matches s against g, where "*" is any run of bytes. It runs in
// O(len(g)·len(s)) at worst, with no recursion.
func glob(g, s string) bool {
	gi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case gi < len(g) && g[gi] == '*':
			star, mark = gi, si
			gi++
		case gi < len(g) && g[gi] == s[si]:
			gi++
			si++
		case star >= 0:
			gi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for gi < len(g) && g[gi] == '*' {
		gi++
	}
	return gi == len(g)
}

// compilePatterns compiles every pattern of srcs.
func compilePatterns(srcs []string) ([]pattern, error) {
	out := make([]pattern, 0, len(srcs))
	for _, s := range srcs {
		p, err := compilePattern(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// firstMatch is the first of ps that matches name on server.
func firstMatch(ps []pattern, server, name string) (pattern, bool) {
	for _, p := range ps {
		if p.match(server, name) {
			return p, true
		}
	}
	return pattern{}, false
}

// subject is the name a request's grant and role patterns are matched
// against: the tool, the prompt or the resource URI.
func subject(req *Request) string {
	switch req.Method {
	case MethodToolsCall:
		return req.Tool
	case MethodPrompt:
		return req.Prompt
	case MethodResource:
		return req.ResourceURI
	case MethodCompletion:
		if req.Prompt != "" {
			return req.Prompt
		}
		return req.ResourceURI
	}
	return ""
}
