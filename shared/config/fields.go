package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-gw/aegis/shared/killswitch"
)

// unknownFields walks the YAML document against File's Go type and
// returns one error per key that names no field: its path in the file
// (tenants[0].servrs), its line, the fields known there and the nearest
// of them. The decoder's own message names a Go type instead
// (config.FileTenant), which is no help to whoever wrote the file.
func unknownFields(doc *yaml.Node) []error {
	if doc == nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	var errs []error
	walkFields(doc.Content[0], reflect.TypeOf(File{}), "", &errs)
	return errs
}

func walkFields(n *yaml.Node, t reflect.Type, path string, errs *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // the decoder reports a wrong kind with its line
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			if !ok {
				*errs = append(*errs, unknownField(join(path, k.Value), k.Line, fields))
				continue
			}
			walkFields(v, ft, join(path, k.Value), errs)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			walkFields(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkFields(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), errs)
		}
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// yamlFields are the YAML keys of struct t (its inline structs' keys
// included) and their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
			continue
		case strings.Contains(opts, "inline"):
			for k, v := range yamlFields(f.Type) {
				m[k] = v
			}
			continue
		case name == "":
			name = strings.ToLower(f.Name) // the decoder's default
		}
		m[name] = f.Type
	}
	return m
}

func unknownField(path string, line int, fields map[string]reflect.Type) error {
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	sort.Strings(known)
	name := path[strings.LastIndex(path, ".")+1:]
	msg := fmt.Sprintf("%s: unknown field (line %d)", path, line)
	if near := killswitch.Near(name, known); len(near) > 0 {
		msg += "; did you mean " + strings.Join(near, " or ") + "?"
	}
	return fmt.Errorf("%s; known fields here: %s", msg, strings.Join(known, ", "))
}
