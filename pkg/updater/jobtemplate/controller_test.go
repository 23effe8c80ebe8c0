package jobtemplate

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
)

// failingJobs is a Job lister that cannot list.
type failingJobs struct{ batchlisters.JobLister }

func (failingJobs) List(labels.Selector) ([]*batchv1.Job, error) {
	return nil, errors.New("index broken")
}

// The cleanup of records forgets those of Jobs that are not live: a lister
// that fails must not read as "no Job", which would forget every Job's
// record.
func TestLiveSaysWhenItCannotTell(t *testing.T) {
	_, err := New(Config{}, Deps{Jobs: failingJobs{}}).Live()
	require.ErrorContains(t, err, "index broken")

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	job := &batchv1.Job{}
	job.Namespace, job.Name, job.UID = "default", "train", "uid-train"
	require.NoError(t, indexer.Add(job))
	live, err := New(Config{}, Deps{Jobs: batchlisters.NewJobLister(indexer)}).Live()
	require.NoError(t, err)
	assert.Equal(t, []types.UID{"uid-train"}, live)

	live, err = New(Config{}, Deps{}).Live()
	assert.NoError(t, err, "no Jobs watched")
	assert.Empty(t, live)
}
