package usage

// The PromQL query templates are Go text/template syntax, parsed by
// text/template/parse and executed here over QueryData, not by
// text/template. The reason is the binary's size and so its memory: a
// program that can execute text/template calls reflect's MethodByName with
// names known only at run time, so the linker must keep every exported
// method of every type that reaches an interface, which for a client-go
// program is tens of megabytes of code and tables (the recommender's
// stripped binary was 56 MB with text/template, 35 MB without), and a
// process's resident memory includes the pages of its binary it touches
// (docs/results/performance.md). The evaluator below supports the part of the
// language a query needs; anything else is refused when the template is
// parsed, with an error naming it.

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"text/template/parse"
)

// QueryFuncNames lists the functions a query template may call: ours
// (trimSuffix, trimPrefix) and text/template's built-ins that make sense
// over QueryData's strings and numbers.
func QueryFuncNames() []string {
	return []string{"trimSuffix", "trimPrefix", "printf", "print", "println", "len", "not", "and", "or", "eq", "ne", "lt", "le", "gt", "ge"}
}

// queryFuncs names the functions for the parser, which only checks that a
// name is defined (by a non-nil value); call executes them.
var queryFuncs = func() map[string]any {
	m := map[string]any{}
	for _, n := range QueryFuncNames() {
		m[n] = n
	}
	return m
}()

// queryFields maps a QueryData field name to its index.
var queryFields = func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeFor[QueryData]()
	for i := range t.NumField() {
		m[t.Field(i).Name] = i
	}
	return m
}()

// queryTemplate is one parsed query template.
type queryTemplate struct {
	name string
	root *parse.ListNode
}

// parseQuery parses text as a query template named name, refusing what the
// evaluator does not support.
func parseQuery(name, text string) (*queryTemplate, error) {
	trees, err := parse.Parse(name, text, "", "", queryFuncs)
	if err != nil {
		return nil, err
	}
	if len(trees) != 1 || trees[name] == nil {
		return nil, fmt.Errorf("template: %s: define and block are not supported in a query template", name)
	}
	root := trees[name].Root
	if err := check(root); err != nil {
		return nil, fmt.Errorf("template: %s: %w", name, err)
	}
	return &queryTemplate{name: name, root: root}, nil
}

// errUnsupported says what a query template may hold.
var errUnsupported = errors.New("query templates support text, comments, fields of the query data, ., $, " +
	"string, number and boolean constants, pipelines, parentheses, if/else/with and the functions " +
	strings.Join(QueryFuncNames(), ", "))

// check refuses the nodes the evaluator does not execute.
func check(n parse.Node) error {
	switch n := n.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := check(c); err != nil {
				return err
			}
		}
		return nil
	case *parse.TextNode, *parse.CommentNode, *parse.DotNode, *parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.IdentifierNode:
		return nil
	case *parse.ActionNode:
		return check(n.Pipe)
	case *parse.IfNode:
		return errors.Join(check(n.Pipe), check(n.List), check(n.ElseList))
	case *parse.WithNode:
		return errors.Join(check(n.Pipe), check(n.List), check(n.ElseList))
	case *parse.PipeNode:
		if len(n.Decl) > 0 {
			return fmt.Errorf("%s: variables: %w", n, errUnsupported)
		}
		for _, c := range n.Cmds {
			for _, a := range c.Args {
				if err := check(a); err != nil {
					return err
				}
			}
		}
		return nil
	case *parse.FieldNode:
		if len(n.Ident) != 1 {
			return fmt.Errorf("%s: the query data's fields are strings and numbers, without fields of their own", n)
		}
		if _, ok := queryFields[n.Ident[0]]; !ok {
			return fmt.Errorf("%s: no field %s in the query data (%s)", n, n.Ident[0], strings.Join(fieldNames(), ", "))
		}
		return nil
	case *parse.VariableNode:
		if len(n.Ident) == 1 && n.Ident[0] == "$" {
			return nil
		}
		if len(n.Ident) == 2 && n.Ident[0] == "$" {
			return check(&parse.FieldNode{NodeType: parse.NodeField, Ident: n.Ident[1:]})
		}
		return fmt.Errorf("%s: variables: %w", n, errUnsupported)
	}
	return fmt.Errorf("%s: %w", n, errUnsupported)
}

func fieldNames() []string {
	t := reflect.TypeFor[QueryData]()
	out := make([]string, t.NumField())
	for i := range out {
		out[i] = "." + t.Field(i).Name
	}
	return out
}

// execute renders the template with d.
func (t *queryTemplate) execute(d QueryData) (string, error) {
	s := &state{root: reflect.ValueOf(d)}
	var b strings.Builder
	if err := s.walk(&b, s.root, t.root); err != nil {
		return "", fmt.Errorf("template: %s: %w", t.name, err)
	}
	return b.String(), nil
}

type state struct{ root reflect.Value }

func (s *state) walk(b *strings.Builder, dot reflect.Value, n parse.Node) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := s.walk(b, dot, c); err != nil {
				return err
			}
		}
	case *parse.TextNode:
		b.Write(n.Text)
	case *parse.CommentNode:
	case *parse.ActionNode:
		v, err := s.pipe(dot, n.Pipe)
		if err != nil {
			return err
		}
		fmt.Fprint(b, v.Interface())
	case *parse.IfNode:
		v, err := s.pipe(dot, n.Pipe)
		if err != nil {
			return err
		}
		if truth(v) {
			return s.walk(b, dot, n.List)
		}
		if n.ElseList != nil {
			return s.walk(b, dot, n.ElseList)
		}
	case *parse.WithNode:
		v, err := s.pipe(dot, n.Pipe)
		if err != nil {
			return err
		}
		if truth(v) {
			return s.walk(b, v, n.List)
		}
		if n.ElseList != nil {
			return s.walk(b, dot, n.ElseList)
		}
	default:
		return fmt.Errorf("%s: %w", n, errUnsupported)
	}
	return nil
}

// pipe evaluates a pipeline: each command's value is the last argument of
// the next.
func (s *state) pipe(dot reflect.Value, p *parse.PipeNode) (reflect.Value, error) {
	var v reflect.Value
	for i, c := range p.Cmds {
		var err error
		if v, err = s.command(dot, c, v, i > 0); err != nil {
			return reflect.Value{}, err
		}
	}
	return v, nil
}

func (s *state) command(dot reflect.Value, c *parse.CommandNode, final reflect.Value, piped bool) (reflect.Value, error) {
	id, isFunc := c.Args[0].(*parse.IdentifierNode)
	if !isFunc {
		if len(c.Args) > 1 || piped {
			return reflect.Value{}, fmt.Errorf("%s: can't give argument to non-function %s", c, c.Args[0])
		}
		return s.arg(dot, c.Args[0])
	}
	name := id.Ident
	// and, or: short-circuit, as text/template does.
	if name == "and" || name == "or" {
		args := c.Args[1:]
		if len(args)+btoi(piped) == 0 {
			return reflect.Value{}, fmt.Errorf("%s: wrong number of args for %s: want at least 1 got 0", c, name)
		}
		var v reflect.Value
		for i := 0; i < len(args)+btoi(piped); i++ {
			if i < len(args) {
				var err error
				if v, err = s.arg(dot, args[i]); err != nil {
					return reflect.Value{}, err
				}
			} else {
				v = final
			}
			if truth(v) == (name == "or") {
				return v, nil
			}
		}
		return v, nil
	}
	args := make([]reflect.Value, 0, len(c.Args))
	for _, a := range c.Args[1:] {
		v, err := s.arg(dot, a)
		if err != nil {
			return reflect.Value{}, err
		}
		args = append(args, v)
	}
	if piped {
		args = append(args, final)
	}
	v, err := call(name, args)
	if err != nil {
		return reflect.Value{}, fmt.Errorf("%s: error calling %s: %w", c, name, err)
	}
	return v, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// arg evaluates an argument node.
func (s *state) arg(dot reflect.Value, n parse.Node) (reflect.Value, error) {
	switch n := n.(type) {
	case *parse.DotNode:
		return dot, nil
	case *parse.FieldNode:
		return field(dot, n.Ident[0], n)
	case *parse.VariableNode:
		if len(n.Ident) == 1 {
			return s.root, nil
		}
		return field(s.root, n.Ident[1], n)
	case *parse.StringNode:
		return reflect.ValueOf(n.Text), nil
	case *parse.BoolNode:
		return reflect.ValueOf(n.True), nil
	case *parse.NumberNode:
		// As text/template: written with a point or an exponent, a float
		// (90.0); else an int if it is one.
		switch {
		case n.IsFloat && strings.ContainsAny(n.Text, ".eEpP") && !strings.HasPrefix(n.Text, "0x") && !strings.HasPrefix(n.Text, "0X"):
			return reflect.ValueOf(n.Float64), nil
		case n.IsInt:
			return reflect.ValueOf(int(n.Int64)), nil
		case n.IsFloat:
			return reflect.ValueOf(n.Float64), nil
		}
		return reflect.Value{}, fmt.Errorf("%s: only integer and floating-point constants", n)
	case *parse.PipeNode:
		return s.pipe(dot, n)
	case *parse.IdentifierNode:
		return call(n.Ident, nil)
	}
	return reflect.Value{}, fmt.Errorf("%s: %w", n, errUnsupported)
}

func field(dot reflect.Value, name string, n parse.Node) (reflect.Value, error) {
	if dot.Type() != reflect.TypeFor[QueryData]() {
		return reflect.Value{}, fmt.Errorf("%s: can't evaluate field %s in type %s", n, name, dot.Type())
	}
	return dot.Field(queryFields[name]), nil
}

// truth is text/template's truth for the values a query sees.
func truth(v reflect.Value) bool {
	if !v.IsValid() {
		return false
	}
	switch v.Kind() {
	case reflect.Bool:
		return v.Bool()
	case reflect.String:
		return v.Len() > 0
	case reflect.Int:
		return v.Int() != 0
	case reflect.Float64:
		return v.Float() != 0
	case reflect.Struct:
		return true
	}
	return !v.IsZero()
}

func call(name string, args []reflect.Value) (reflect.Value, error) {
	want := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("wrong number of args for %s: want %d got %d", name, n, len(args))
		}
		return nil
	}
	str := func(i int) (string, error) {
		if args[i].Kind() != reflect.String {
			return "", fmt.Errorf("wrong type for value; expected string; got %s", args[i].Type())
		}
		return args[i].String(), nil
	}
	ifaces := func(from int) []any {
		out := make([]any, 0, len(args)-from)
		for _, a := range args[from:] {
			out = append(out, a.Interface())
		}
		return out
	}
	switch name {
	case "trimSuffix", "trimPrefix":
		if err := want(2); err != nil {
			return reflect.Value{}, err
		}
		affix, err := str(0)
		if err != nil {
			return reflect.Value{}, err
		}
		s, err := str(1)
		if err != nil {
			return reflect.Value{}, err
		}
		if name == "trimSuffix" {
			return reflect.ValueOf(strings.TrimSuffix(s, affix)), nil
		}
		return reflect.ValueOf(strings.TrimPrefix(s, affix)), nil
	case "printf":
		if len(args) == 0 {
			return reflect.Value{}, fmt.Errorf("wrong number of args for printf: want at least 1 got 0")
		}
		f, err := str(0)
		if err != nil {
			return reflect.Value{}, err
		}
		return reflect.ValueOf(fmt.Sprintf(f, ifaces(1)...)), nil
	case "print":
		return reflect.ValueOf(fmt.Sprint(ifaces(0)...)), nil
	case "println":
		return reflect.ValueOf(fmt.Sprintln(ifaces(0)...)), nil
	case "len":
		if err := want(1); err != nil {
			return reflect.Value{}, err
		}
		s, err := str(0)
		if err != nil {
			return reflect.Value{}, fmt.Errorf("len of type %s", args[0].Type())
		}
		return reflect.ValueOf(len(s)), nil
	case "not":
		if err := want(1); err != nil {
			return reflect.Value{}, err
		}
		return reflect.ValueOf(!truth(args[0])), nil
	case "eq", "ne", "lt", "le", "gt", "ge":
		return compare(name, args)
	}
	return reflect.Value{}, fmt.Errorf("%q is not a defined function", name)
}

// compare is text/template's eq (true if the first argument equals any
// other), ne, lt, le, gt and ge over strings, booleans and numbers of one
// kind.
func compare(name string, args []reflect.Value) (reflect.Value, error) {
	if name == "eq" {
		if len(args) < 2 {
			return reflect.Value{}, errors.New("missing argument for comparison")
		}
	} else if len(args) != 2 {
		return reflect.Value{}, fmt.Errorf("wrong number of args for %s: want 2 got %d", name, len(args))
	}
	a := args[0]
	cmp := func(b reflect.Value) (int, error) {
		if !a.IsValid() || !b.IsValid() || a.Kind() != b.Kind() {
			return 0, errors.New("incompatible types for comparison")
		}
		switch a.Kind() {
		case reflect.String:
			return strings.Compare(a.String(), b.String()), nil
		case reflect.Int:
			return sign(float64(a.Int() - b.Int())), nil
		case reflect.Float64:
			return sign(a.Float() - b.Float()), nil
		case reflect.Bool:
			if name != "eq" && name != "ne" {
				return 0, errors.New("invalid type for comparison")
			}
			if a.Bool() == b.Bool() {
				return 0, nil
			}
			return 1, nil
		}
		return 0, errors.New("invalid type for comparison")
	}
	if name == "eq" {
		for _, b := range args[1:] {
			c, err := cmp(b)
			if err != nil {
				return reflect.Value{}, err
			}
			if c == 0 {
				return reflect.ValueOf(true), nil
			}
		}
		return reflect.ValueOf(false), nil
	}
	c, err := cmp(args[1])
	if err != nil {
		return reflect.Value{}, err
	}
	var r bool
	switch name {
	case "ne":
		r = c != 0
	case "lt":
		r = c < 0
	case "le":
		r = c <= 0
	case "gt":
		r = c > 0
	case "ge":
		r = c >= 0
	}
	return reflect.ValueOf(r), nil
}

func sign(x float64) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}
