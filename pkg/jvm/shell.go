package jvm

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// A container often starts its JVM through a shell: command: [sh, -c,
// "exec java $JAVA_OPTS -jar app.jar"]. The script is read as far as
// finding the java command and its options needs: words, quotes, $NAME and
// ${NAME} (expanded from the container's variables, unquoted ones split on
// white space), comments, and the operators that end a command. What a
// shell would compute ($(...), `...`, ${NAME:-x}, $1, $@) is not: in the
// java command's options, it makes the heap unknown. So does a script that
// sets or unsets a variable the JVM or the script reads, or sources a file.

// part is a piece of a shell word.
type part struct {
	text   string // literal text
	name   string // a $NAME or ${NAME} expansion
	quoted bool   // within double quotes: the expansion is not split
	bad    string // an expansion not read, as written (shortened)
}

type sword struct {
	parts []part
}

// literal is the word's text when it has no expansion (quotes removed).
func (w sword) literal() (string, bool) {
	var b strings.Builder
	for _, p := range w.parts {
		if p.name != "" || p.bad != "" {
			return "", false
		}
		b.WriteString(p.text)
	}
	return b.String(), true
}

// script is what scanScript finds: the script's simple commands, and the
// variables it sets.
type script struct {
	commands [][]sword
	// assigned are the variables the script sets, exports or unsets.
	assigned map[string]bool
	// sources tells that the script sources a file (". f", "source f"),
	// which may set any variable.
	sources bool
}

// Errors of scanScript.
var (
	// errShell is a script this scanner does not follow (an unmatched
	// quote).
	errShell = errors.New("the script cannot be read")
	// errTooManyWords is a script of more than MaxTokens words.
	errTooManyWords = fmt.Errorf("the script has more than %d words", MaxTokens)
)

// scanScript splits s (at most MaxValueLength bytes) into simple commands
// of words, at most MaxTokens words in all.
func scanScript(s string) (script, error) {
	sc := script{assigned: map[string]bool{}}
	var (
		cmd   []sword
		cur   sword
		in    bool // a word is being read
		skip  bool // the next word is a redirection's target
		words int
	)
	endWord := func() error {
		if !in {
			return nil
		}
		if skip {
			skip = false
		} else {
			if words++; words > MaxTokens {
				return errTooManyWords
			}
			cmd = append(cmd, cur)
		}
		cur, in = sword{}, false
		return nil
	}
	endCommand := func() {
		if len(cmd) > 0 {
			sc.commands = append(sc.commands, cmd)
		}
		cmd = nil
	}
	lit := func(t string) { cur.parts = append(cur.parts, part{text: t}); in = true }
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if err := endWord(); err != nil {
				return script{}, err
			}
			i++
		case c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')':
			if err := endWord(); err != nil {
				return script{}, err
			}
			endCommand()
			i++
		case c == '<' || c == '>':
			// A redirection: a file descriptor's number just before it
			// is not a word, nor is its target.
			if in {
				if t, ok := cur.literal(); ok && allDigits(t) {
					cur, in = sword{}, false
				}
			}
			if err := endWord(); err != nil {
				return script{}, err
			}
			for i < len(s) && (s[i] == '<' || s[i] == '>' || s[i] == '&' || s[i] == '|') {
				i++
			}
			skip = true
		case c == '#' && !in:
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '\\':
			if i+1 < len(s) && s[i+1] != '\n' {
				lit(s[i+1 : i+2])
			}
			i += 2
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return script{}, errShell
			}
			lit(s[i+1 : i+1+end])
			i += end + 2
		case c == '"':
			n, err := scanDouble(s[i+1:], &cur)
			if err != nil {
				return script{}, err
			}
			in = true
			i += n + 2
		case c == '$' || c == '`':
			p, n := scanDollar(s[i:])
			cur.parts = append(cur.parts, p)
			in = true
			i += n
		default:
			j := i + 1
			for j < len(s) && !strings.ContainsRune(" \t\n;&|()<>\\'\"$`", rune(s[j])) {
				j++
			}
			lit(s[i:j])
			i = j
		}
	}
	if err := endWord(); err != nil {
		return script{}, err
	}
	endCommand()
	for _, cmd := range sc.commands {
		sc.note(cmd)
	}
	return sc, nil
}

// scanDouble reads a double-quoted string's inside, s starting after the
// opening quote, into w; it returns the length read, the closing quote
// excluded.
func scanDouble(s string, w *sword) (int, error) {
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			w.parts = append(w.parts, part{text: b.String(), quoted: true})
			b.Reset()
		}
	}
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '"':
			flush()
			if len(w.parts) == 0 {
				w.parts = append(w.parts, part{quoted: true}) // "" is an empty word
			}
			return i, nil
		case '\\':
			if i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
				if s[i+1] != '\n' {
					b.WriteByte(s[i+1])
				}
				i += 2
				continue
			}
			b.WriteByte(c)
			i++
		case '$', '`':
			flush()
			p, n := scanDollar(s[i:])
			p.quoted = true
			w.parts = append(w.parts, p)
			i += n
		default:
			b.WriteByte(c)
			i++
		}
	}
	return 0, errShell
}

// scanDollar reads an expansion at the start of s ($ or `): $NAME and
// ${NAME} are read; anything else a shell would compute is a bad part. A
// $ that starts nothing is literal.
func scanDollar(s string) (part, int) {
	if s[0] == '`' {
		end := strings.IndexByte(s[1:], '`')
		if end < 0 {
			return part{bad: shorten(s)}, len(s)
		}
		return part{bad: shorten(s[:end+2])}, end + 2
	}
	if len(s) == 1 {
		return part{text: "$"}, 1
	}
	switch c := s[1]; {
	case c == '{':
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return part{bad: shorten(s)}, len(s)
		}
		if name := s[2:end]; isName(name) {
			return part{name: name}, end + 1
		}
		return part{bad: shorten(s[:end+1])}, end + 1
	case c == '(':
		depth := 0
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '(':
				depth++
			case ')':
				if depth--; depth == 0 {
					return part{bad: shorten(s[:i+1])}, i + 1
				}
			}
		}
		return part{bad: shorten(s)}, len(s)
	case c == '_' || isLetter(c):
		j := 2
		for j < len(s) && (s[j] == '_' || isLetter(s[j]) || isDigit(s[j])) {
			j++
		}
		return part{name: s[1:j]}, j
	case isDigit(c) || strings.IndexByte("@*#?$!-", c) >= 0:
		return part{bad: s[:2]}, 2
	}
	return part{text: "$"}, 1
}

// note records what a command does to the variables: an assignment (NAME=
// before the command, or alone), export, unset, readonly, declare, local,
// typeset or read of a name, and sourcing a file.
func (sc *script) note(cmd []sword) {
	start := true
	for i, w := range cmd {
		if name, ok := assignment(w); ok && (start || declares(cmd, i)) {
			sc.assigned[name] = true
			continue
		}
		t, ok := w.literal()
		if !ok {
			start = false
			continue
		}
		if start && (t == "." || t == "source") {
			sc.sources = true
		}
		if declares(cmd, i) && isName(t) {
			sc.assigned[t] = true
		}
		if !start || !commandWrapper(t) {
			start = false
		}
	}
}

// assignment tells whether w is NAME=... or NAME+=..., whatever follows.
func assignment(w sword) (string, bool) {
	if len(w.parts) == 0 || w.parts[0].name != "" || w.parts[0].bad != "" {
		return "", false
	}
	name, _, ok := strings.Cut(w.parts[0].text, "=")
	name = strings.TrimSuffix(name, "+")
	return name, ok && isName(name)
}

// declares tells whether the word at i is an operand of a command that sets
// or unsets variables.
func declares(cmd []sword, i int) bool {
	for j := range i {
		if t, ok := cmd[j].literal(); ok {
			switch t {
			case "export", "unset", "readonly", "declare", "local", "typeset", "read":
				return true
			}
		}
	}
	return false
}

// commandWrapper tells whether a word at a command's start leaves the next
// word in command position.
func commandWrapper(t string) bool {
	switch t {
	case "exec", "nohup", "env", "command", "time", "nice", "setsid", "then", "do", "else",
		"elif", "if", "while", "until", "{", "!", "--", "tini", "dumb-init":
		return true
	}
	return false
}

// javaCommand finds the last of the script's commands that runs java (in
// command position: after assignments and wrappers such as exec) and
// returns the words after java.
func (sc *script) javaCommand() ([]sword, bool) {
	for c := len(sc.commands) - 1; c >= 0; c-- {
		cmd := sc.commands[c]
		for i, w := range cmd {
			if isJava(w) {
				return cmd[i+1:], true
			}
			if _, ok := assignment(w); ok {
				continue
			}
			if t, ok := w.literal(); !ok || !commandWrapper(t) {
				break
			}
		}
	}
	return nil, false
}

// isJava tells whether w runs java: "java", "/usr/bin/java", or
// "$JAVA_HOME/bin/java" (a path ending in /java after expansions).
func isJava(w sword) bool {
	if t, ok := w.literal(); ok {
		return path.Base(t) == "java"
	}
	last := w.parts[len(w.parts)-1]
	return last.name == "" && last.bad == "" && strings.HasSuffix(last.text, "/java")
}

func isName(s string) bool {
	if s == "" || isDigit(s[0]) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; c != '_' && !isLetter(c) && !isDigit(c) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func allDigits(s string) bool {
	for i := range len(s) {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}
