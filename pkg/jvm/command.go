package jvm

import (
	"errors"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// word is one argument of the java launcher, or something in its place that
// cannot be read (unread set, text saying what).
type word struct {
	text   string
	origin string
	unread Reason
}

// launch is how the container's spec shows its JVM started.
type launch struct {
	// direct: java is run by the command line itself or by a shell
	// script on it; its options are items. Otherwise the image's entry
	// point or a launch script runs it, and the launch scripts' variables
	// are read instead.
	direct bool
	items  []item
	// sh is the script running java, when a shell does.
	sh *script
}

// commandLine finds java in c's command and args (after the kubelet's
// $(VAR) expansion): the first argument that is java, or a shell's -c
// script with a java command, within the first MaxTokens arguments.
func (r *reader) commandLine(c *corev1.Container) launch {
	n := len(c.Command) + len(c.Args)
	arg := func(i int) word {
		raw := ""
		if i < len(c.Command) {
			raw = c.Command[i]
		} else {
			raw = c.Args[i-len(c.Command)]
		}
		if len(raw) > MaxValueLength {
			return word{unread: ReasonTooLarge, origin: "the command line",
				text: fmt.Sprintf("an argument of %d bytes, more than %d", len(raw), MaxValueLength)}
		}
		v, unread := r.env.expand(raw)
		if unread != nil {
			return word{unread: unread.unread, origin: "the command line", text: unread.note}
		}
		return word{text: v, origin: "the command line"}
	}
	for i := 0; i < min(n, MaxTokens); i++ {
		w := arg(i)
		if w.unread != "" {
			continue
		}
		base := path.Base(w.text)
		if base == "java" {
			rest := func(j int) word { return arg(i + 1 + j) }
			return launch{direct: true, items: r.launcherOptions(n-i-1, rest)}
		}
		if isShell(base) {
			return r.shellLaunch(n-i-1, func(j int) word { return arg(i + 1 + j) })
		}
	}
	return launch{}
}

func isShell(base string) bool {
	switch base {
	case "sh", "bash", "dash", "ash", "zsh", "ksh", "mksh":
		return true
	}
	return false
}

// shellLaunch reads a shell's arguments: options (one with c makes the
// first operand a script), then the script. A shell running a file, or a
// script with no java command, does not show how java starts.
func (r *reader) shellLaunch(n int, arg func(int) word) launch {
	inline := false
	i := 0
	for ; i < min(n, MaxTokens); i++ {
		w := arg(i)
		t := w.text
		if w.unread != "" || t == "" || (t[0] != '-' && t[0] != '+') {
			break
		}
		if t == "--" || t == "-" {
			i++
			break
		}
		if t[0] == '-' && !strings.HasPrefix(t, "--") && strings.ContainsRune(t, 'c') {
			inline = true
		}
		if t == "-o" || t == "+o" || t == "--rcfile" || t == "--init-file" {
			i++ // the option's value
		}
	}
	if !inline || i >= n {
		return launch{}
	}
	w := arg(i)
	if w.unread != "" {
		return launch{direct: true, items: []item{opaque(w.unread, "the shell script", w.text)}}
	}
	sc, err := scanScript(w.text)
	if err != nil {
		reason := ReasonShell
		if errors.Is(err, errTooManyWords) {
			reason = ReasonTooLarge
		}
		return launch{direct: true, items: []item{opaque(reason, "the shell script", err.Error())}}
	}
	words, ok := sc.javaCommand()
	if !ok {
		return launch{}
	}
	fields := r.expandWords(words, &sc)
	get := func(j int) word { return fields[j] }
	return launch{direct: true, items: r.launcherOptions(len(fields), get), sh: &sc}
}

// expandWords expands the java command's words into the launcher's
// arguments, as a shell would: $NAME from the container's variables,
// unquoted expansions split on white space. A variable the script sets, or
// may set by sourcing a file, and every expansion not read, are unread
// words. At most MaxTokens arguments.
func (r *reader) expandWords(words []sword, sc *script) []word {
	var out []word
	for _, w := range words {
		var (
			cur    strings.Builder
			has    bool // cur is an argument, maybe empty ("")
			origin = "the shell script"
		)
		flush := func() {
			if has {
				out = append(out, word{text: cur.String(), origin: origin})
			}
			cur.Reset()
			has = false
		}
		for _, p := range w.parts {
			switch {
			case p.bad != "":
				return append(out, word{unread: ReasonShell, origin: "the shell script",
					text: "the script computes " + quote(p.bad) + ", which is not read"})
			case p.name != "":
				v, unread := r.scriptVariable(p.name, sc)
				if unread != nil {
					return append(out, *unread)
				}
				origin = p.name + " in the shell script"
				if p.quoted {
					cur.WriteString(v)
					has = true
					continue
				}
				fields := strings.Fields(v)
				if len(fields) > 0 && startsWithSpace(v) {
					flush()
				}
				for k, f := range fields {
					if k > 0 {
						flush()
					}
					cur.WriteString(f)
					has = true
				}
				if len(fields) > 0 && endsWithSpace(v) {
					flush()
				}
			default:
				cur.WriteString(p.text)
				has = true
			}
			if cur.Len() > MaxValueLength {
				return append(out, word{unread: ReasonTooLarge, origin: origin,
					text: fmt.Sprintf("an argument longer than %d bytes", MaxValueLength)})
			}
		}
		flush()
		if len(out) > MaxTokens {
			return append(out[:MaxTokens], word{unread: ReasonTooLarge, origin: origin,
				text: fmt.Sprintf("more than %d arguments", MaxTokens)})
		}
	}
	return out
}

// scriptVariable is a variable's value as the script's java command sees
// it: the container's, unless the script sets it or sources a file.
func (r *reader) scriptVariable(name string, sc *script) (string, *word) {
	origin := name + " in the shell script"
	if sc.assigned[name] {
		return "", &word{unread: ReasonShell, origin: origin, text: "the script sets " + name}
	}
	if sc.sources {
		return "", &word{unread: ReasonShell, origin: origin, text: "the script sources a file, which may set " + name}
	}
	v, ok := r.env.lookup(name)
	if !ok {
		return "", nil
	}
	if v.unread != "" {
		return "", &word{unread: v.unread, origin: origin, text: v.note}
	}
	return v.value, nil
}

func startsWithSpace(s string) bool { return s != "" && strings.TrimLeft(s, " \t\n") != s }
func endsWithSpace(s string) bool   { return s != "" && strings.TrimRight(s, " \t\n") != s }

// launcherOptions reads the java launcher's arguments up to the main class
// (or -jar, -m, a source file): each option that bears on the heap, each
// @argfile (expanded in place by the launcher, not read here), and
// anything unread, after which nothing more can be read.
func (r *reader) launcherOptions(n int, arg func(int) word) []item {
	var items []item
	argfiles := true
	for i := 0; i < n; i++ {
		w := arg(i)
		if w.unread != "" {
			return append(items, opaque(w.unread, w.origin, w.text))
		}
		if i >= MaxTokens || !r.take() {
			return append(items, opaque(ReasonTooLarge, w.origin, fmt.Sprintf("more than %d options", MaxTokens)))
		}
		t := w.text
		switch {
		case argfiles && strings.HasPrefix(t, "@"):
			items = append(items, optionsFile(w.origin, t))
		case t == "--disable-@files":
			argfiles = false
		case t == "-jar" || t == "-m" || t == "--module" || strings.HasPrefix(t, "--module="):
			return items
		case launcherTakesValue(t):
			i++
		case strings.HasPrefix(t, "-"):
			if it, ok := classify(t, w.origin); ok {
				items = append(items, it)
			}
		default:
			return items // the main class, or a source file
		}
	}
	return items
}

// launcherTakesValue tells whether a launcher option takes the next
// argument as its value.
func launcherTakesValue(t string) bool {
	switch t {
	case "-cp", "-classpath", "--class-path", "-p", "--module-path", "--upgrade-module-path",
		"--add-modules", "--limit-modules", "--add-reads", "--add-exports", "--add-opens",
		"--patch-module", "--enable-native-access", "--source", "--describe-module", "-d":
		return true
	}
	return false
}
