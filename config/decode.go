package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeInto sets the fields of v (a pointer to a struct) from the YAML
// mapping in node, key by key, and returns every problem found, each naming
// its YAML path (bash.timeoutMs), the value and the rule. values gets the
// value node of every key read, by path, for the line of a later range
// error. yaml.v3's own
// decoding names neither the key of a wrong type ("cannot unmarshal !!str
// into int64") nor the file's key of an unknown field ("field timeoutMS not
// found in type shell.Config"), and takes 1.5 for 1.
func decodeInto(node *yaml.Node, v reflect.Value, path string, values map[string]*yaml.Node) []error {
	if node.Kind == yaml.DocumentNode {
		if len(node.Content) == 0 {
			return nil
		}
		node = node.Content[0]
	}
	if u, ok := v.Addr().Interface().(yaml.Unmarshaler); ok {
		if err := u.UnmarshalYAML(node); err != nil {
			return []error{fmt.Errorf("%s: %v", path, err)}
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		if node.Kind == yaml.ScalarNode && node.ShortTag() == "!!null" {
			return nil // an empty section: its defaults
		}
		if node.Kind != yaml.MappingNode {
			return []error{fmt.Errorf("%s: %s is not a section of keys", orTop(path), describe(node))}
		}
		var errs []error
		keys := fieldsByKey(v.Type())
		seen := map[string]int{}
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, val := node.Content[i], node.Content[i+1]
			field, ok := keys[k.Value]
			key := join(path, k.Value)
			if line, twice := seen[k.Value]; twice {
				errs = append(errs, fmt.Errorf("%s: given twice (lines %d and %d); keep one", key, line, k.Line))
				continue
			}
			seen[k.Value] = k.Line
			if !ok {
				errs = append(errs, fmt.Errorf("%s: unknown key (line %d; %s has %s)", key, k.Line, orTop(path), strings.Join(known(keys), ", ")))
				continue
			}
			values[key] = val
			errs = append(errs, decodeInto(val, v.Field(field), key, values)...)
		}
		return errs
	case reflect.Bool:
		b, err := strconv.ParseBool(node.Value)
		if node.Kind != yaml.ScalarNode || node.ShortTag() != "!!bool" || err != nil {
			return []error{fmt.Errorf("%s: %s is not true or false", path, describe(node))}
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		var n int64
		if node.Kind != yaml.ScalarNode || node.ShortTag() != "!!int" || node.Decode(&n) != nil || v.OverflowInt(n) {
			return []error{fmt.Errorf("%s: %s is not a whole number", path, describe(node))}
		}
		if !plainDecimal(node.Value) {
			// YAML reads 010 as 8, and takes 0x10, 0o10, 1_000 and +5.
			return []error{fmt.Errorf("%s: %s: write the number in plain decimal digits (%d?)", path, describe(node), n)}
		}
		v.SetInt(n)
	case reflect.String:
		if node.Kind != yaml.ScalarNode || node.ShortTag() == "!!null" {
			return []error{fmt.Errorf("%s: %s is not a text", path, describe(node))}
		}
		v.SetString(node.Value)
	default:
		return []error{fmt.Errorf("%s: cannot be set from a file (type %s)", path, v.Type())}
	}
	return nil
}

// fieldsByKey maps the yaml keys of struct type t to field indexes.
func fieldsByKey(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			m[name] = i
		}
	}
	return m
}

func known(keys map[string]int) []string {
	out := make([]string, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return fmt.Sprintf("a section of keys (line %d)", n.Line)
	case yaml.SequenceNode:
		return fmt.Sprintf("a list (line %d)", n.Line)
	case yaml.AliasNode:
		return fmt.Sprintf("an alias (line %d)", n.Line)
	}
	return fmt.Sprintf("%q (line %d)", n.Value, n.Line)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "the file"
	}
	return path
}

// plainDecimal: an optional minus, then 0 or digits not starting with 0.
func plainDecimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
