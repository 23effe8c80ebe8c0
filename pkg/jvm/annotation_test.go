package jvm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestParseAnnotation(t *testing.T) {
	ds, err := ParseAnnotation(" kafka overhead=768Mi+10% ; connect heap=2Gi;zk heap=50% overhead=256Mi; * ;")
	require.NoError(t, err)
	assert.Equal(t, 4, ds.Len())

	kafka, ok := ds.For("kafka")
	require.True(t, ok)
	assert.Nil(t, kafka.Heap)
	assert.Equal(t, Overhead{Fixed: 768 * MiB, Percent: 10}, kafka.OverheadOrDefault())

	connect, ok := ds.For("connect")
	require.True(t, ok)
	require.NotNil(t, connect.Heap)
	assert.Equal(t, FixedHeap(2*GiB), *connect.Heap)
	assert.Equal(t, DefaultOverhead, connect.OverheadOrDefault())

	zk, ok := ds.For("zk")
	require.True(t, ok)
	require.NotNil(t, zk.Heap)
	assert.Equal(t, PercentHeap(50), *zk.Heap)

	other, ok := ds.For("sidecar")
	require.True(t, ok, "* declares the others")
	assert.Equal(t, Declaration{}, other)

	again, err := ParseAnnotation(ds.String())
	require.NoError(t, err, ds.String())
	assert.Equal(t, ds, again, "String reads back")
	assert.Equal(t, "connect heap=2Gi; kafka overhead=768Mi+10%; zk overhead=256Mi heap=50%; *", ds.String())

	ds, err = ParseAnnotation("kafka")
	require.NoError(t, err)
	_, ok = ds.For("zookeeper")
	assert.False(t, ok, "only what is named")
	_, ok = Declarations{}.For("kafka")
	assert.False(t, ok, "the zero value declares nothing")
}

func TestParseAnnotationRefuses(t *testing.T) {
	tests := map[string]struct {
		value, want string
	}{
		"empty":                   {"", "names no container"},
		"only separators":         {" ; ;", "names no container"},
		"too long":                {strings.Repeat("a", MaxAnnotationLength+1), "more than 2048"},
		"too many entries":        {strings.Repeat("a;", MaxDeclarations) + "b", "65 entries, more than 64"},
		"a name twice":            {"kafka; kafka", `names container "kafka" twice`},
		"* twice":                 {"*; *", "names * twice"},
		"not a container name":    {"Kafka_1", `"Kafka_1" is not a container name`},
		"a name too long":         {strings.Repeat("a", 64), "is not a container name"},
		"an unknown option":       {"kafka xmx=1g", `option "xmx=1g"`},
		"an option without =":     {"kafka overhead", `option "overhead"`},
		"overhead twice":          {"kafka overhead=1Gi overhead=2Gi", "overhead given twice"},
		"heap twice":              {"kafka heap=1Gi heap=2Gi", "heap given twice"},
		"a JVM size, not a k8s":   {"kafka heap=1g", "quantities must match"},
		"a heap of zero":          {"kafka heap=0", "is zero"},
		"a heap of 0%":            {"kafka heap=0%", "above 0"},
		"a heap over 100%":        {"kafka heap=150%", "above 0"},
		"a heap beyond MaxSize":   {"kafka heap=2Pi", "larger than"},
		"a huge exponent":         {"kafka heap=1e999999999", "exponent"},
		"a negative overhead":     {"kafka overhead=-1Gi", "negative"},
		"an overhead over 100%":   {"kafka overhead=150%", "between 0 and 100"},
		"a comma list":            {"kafka,connect", "is not a container name"},
		"the error names entry":   {"kafka; connect heap=x", `entry "connect heap=x"`},
		"an overhead far too big": {"kafka overhead=" + strings.Repeat("9", 70), "more than 64"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseAnnotation(tt.value)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestDeclarationsInspect(t *testing.T) {
	ds, err := ParseAnnotation("kafka heap=1Gi overhead=1Gi")
	require.NoError(t, err)
	kafka := corev1.Container{Name: "kafka", Command: []string{"/opt/kafka/kafka_run.sh"}}
	r := ds.Inspect(&kafka)
	assert.Equal(t, ReasonDeclared, r.Reason)
	assert.Equal(t, FixedHeap(GiB), r.Heap)

	other := corev1.Container{Name: "exporter", Command: []string{"/bin/exporter"}}
	assert.Equal(t, ReasonNotJVM, ds.Inspect(&other).Reason, "not declared, not a JVM")
}

// As many entries and as long a value as the bounds allow are read.
func TestParseAnnotationAtTheBounds(t *testing.T) {
	var entries []string
	for i := range MaxDeclarations {
		entries = append(entries, fmt.Sprintf("c%d", i))
	}
	ds, err := ParseAnnotation(strings.Join(entries, ";"))
	require.NoError(t, err)
	assert.Equal(t, MaxDeclarations, ds.Len())

	long := "kafka overhead=1Gi" + strings.Repeat(" ", MaxAnnotationLength-len("kafka overhead=1Gi"))
	_, err = ParseAnnotation(long)
	require.NoError(t, err)
}
