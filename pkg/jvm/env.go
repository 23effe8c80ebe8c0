package jvm

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The environment variables read: those the JVM reads itself, and those of
// the launch scripts this package knows.
const (
	// envToolOptions is read by the JVM; the command line overrides it.
	envToolOptions = "JAVA_TOOL_OPTIONS"
	// envJDKOptions is read by the java launcher (JDK 9 and later) and
	// put before the command line's options.
	envJDKOptions = "JDK_JAVA_OPTIONS"
	// envOverrideOptions is read by the JVM after the command line: it
	// overrides everything.
	envOverrideOptions = "_JAVA_OPTIONS"
	// envJavaOpts is the common launch scripts' variable (Tomcat, many
	// images' entry points): it is put on the java command line.
	envJavaOpts = "JAVA_OPTS"
	// Kafka's launch scripts put these on the command line, in this order.
	envKafkaHeapOpts        = "KAFKA_HEAP_OPTS"
	envKafkaPerformanceOpts = "KAFKA_JVM_PERFORMANCE_OPTS"
	envKafkaOpts            = "KAFKA_OPTS"
	// Strimzi's image sizes the heap from the memory limit at start with
	// these when KAFKA_HEAP_OPTS is empty.
	envStrimziHeapPercentage = "STRIMZI_DYNAMIC_HEAP_PERCENTAGE"
	envStrimziHeapMax        = "STRIMZI_DYNAMIC_HEAP_MAX"
)

// readVariables are the variables whose presence marks a JVM.
var readVariables = []string{envToolOptions, envJDKOptions, envOverrideOptions, envJavaOpts,
	envKafkaHeapOpts, envKafkaPerformanceOpts, envKafkaOpts, envStrimziHeapPercentage}

// envVar is a variable of the container as the kubelet sets it.
type envVar struct {
	value string
	// unread is set when the value is not known here: set from
	// valueFrom or maybe by envFrom, too long; note then says how.
	unread Reason
	note   string
}

// environment is the container's variables, from its env and envFrom.
type environment struct {
	vars map[string]envVar
	// from are the envFrom sources: each may set any variable whose name
	// starts with its prefix.
	from []corev1.EnvFromSource
}

// readEnv collects c's variables as the kubelet does: envFrom first, then
// env in order, a later entry replacing an earlier one, each value's $(VAR)
// references expanded with the variables before it. Values set from
// ConfigMaps, Secrets or the downward API are not read: such a variable is
// unread. At most MaxEnv entries are examined.
func readEnv(c *corev1.Container) (environment, error) {
	if n := len(c.Env) + len(c.EnvFrom); n > MaxEnv {
		return environment{}, fmt.Errorf("%d environment entries, more than %d", n, MaxEnv)
	}
	e := environment{vars: make(map[string]envVar, len(c.Env)), from: c.EnvFrom}
	for i := range c.Env {
		ev := &c.Env[i]
		switch {
		case ev.ValueFrom != nil:
			e.vars[ev.Name] = envVar{unread: ReasonValueFrom, note: ev.Name + " is set from " + valueSource(ev.ValueFrom) + " (valueFrom), which is not read"}
		case len(ev.Value) > MaxValueLength:
			e.vars[ev.Name] = envVar{unread: ReasonTooLarge, note: fmt.Sprintf("%s is %d bytes long, more than %d", ev.Name, len(ev.Value), MaxValueLength)}
		default:
			v, unread := e.expand(ev.Value)
			if unread != nil {
				e.vars[ev.Name] = envVar{unread: unread.unread, note: ev.Name + " refers to another variable: " + unread.note}
				continue
			}
			e.vars[ev.Name] = envVar{value: v}
		}
	}
	return e, nil
}

func valueSource(vf *corev1.EnvVarSource) string {
	switch {
	case vf.ConfigMapKeyRef != nil:
		return "a ConfigMap"
	case vf.SecretKeyRef != nil:
		return "a Secret"
	case vf.FieldRef != nil:
		return "a field of the pod"
	case vf.ResourceFieldRef != nil:
		return "a resource of the container"
	}
	return "a reference"
}

// lookup finds a variable: set by env, maybe set by envFrom (unread), or
// not set.
func (e environment) lookup(name string) (envVar, bool) {
	if v, ok := e.vars[name]; ok {
		return v, true
	}
	for _, f := range e.from {
		if strings.HasPrefix(name, f.Prefix) {
			src := "a ConfigMap"
			if f.SecretRef != nil {
				src = "a Secret"
			}
			return envVar{unread: ReasonEnvFrom, note: name + " may be set from " + src + " (envFrom), which is not read"}, true
		}
	}
	return envVar{}, false
}

// expand applies the kubelet's expansion of $(VAR) references to s, with
// the variables known so far: $(NAME) becomes NAME's value where NAME is
// set and stays as written where it is not; $$ is one $. A reference to an
// unread variable, or a result longer than MaxValueLength, makes the
// result unread (returned).
func (e environment) expand(s string) (string, *envVar) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	from := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			continue
		}
		b.WriteString(s[from:i])
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				break
			}
			name := s[i+2 : i+2+end]
			if v, ok := e.lookup(name); ok {
				if v.unread != "" {
					return "", &v
				}
				b.WriteString(v.value)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
			b.WriteByte(s[i+1])
			i++
		}
		from = i + 1
		if b.Len() > MaxValueLength {
			return "", &envVar{unread: ReasonTooLarge, note: fmt.Sprintf("a value expands to more than %d bytes", MaxValueLength)}
		}
	}
	b.WriteString(s[from:])
	if b.Len() > MaxValueLength {
		return "", &envVar{unread: ReasonTooLarge, note: fmt.Sprintf("a value expands to more than %d bytes", MaxValueLength)}
	}
	return b.String(), nil
}
