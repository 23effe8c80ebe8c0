package updater

import (
	"context"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

// Sidecars are resized as app containers are, by the same path
// (recommendation.Containers finds them). A recommendation naming an init
// container that is not a sidecar is ignored: the recommendation processing
// leaves it out, and the VPA is told once.

// initIgnored remembers, per VPA, which init containers its recommendation
// was last reported as naming in vain, so that it is reported once per VPA
// and set of names, not at every pod and sync. Safe for concurrent use.
type initIgnored struct {
	mu   sync.Mutex
	seen map[types.UID]string
}

// first reports whether key is new for the VPA with uid, and remembers it,
// in one step: of workers deciding pods of one VPA at once, one reports.
func (n *initIgnored) first(uid types.UID, key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen[uid] == key {
		return false
	}
	if n.seen == nil {
		n.seen = map[types.UID]string{}
	}
	n.seen[uid] = key
	return true
}

// forget drops what is remembered of the VPA with uid (it was deleted).
func (n *initIgnored) forget(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.seen, uid)
}

// reportIgnoredInitContainers tells, once per VPA and set of names, that
// the VPA's recommendation names init containers of pod that are not
// sidecars, and that it is ignored for them.
func (c *Controller) reportIgnoredInitContainers(ctx context.Context, pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) {
	names, total := recommendation.IgnoredInitContainers(pod, vpa)
	if total == 0 {
		return
	}
	list := strings.Join(names, ", ")
	if more := total - len(names); more > 0 {
		list += " and " + strconv.Itoa(more) + " more"
	}
	if !c.initIgnored.first(vpa.UID, list) {
		return
	}
	klog.FromContext(ctx).Info("Recommendation for init containers that are not sidecars ignored", "vpa", klog.KObj(vpa), "initContainers", list)
	c.recorder.Eventf(vpa, corev1.EventTypeWarning, report.EventInitContainerRecommendationIgnored,
		"The recommendation names init containers of pod %s that are not sidecars (restartPolicy Always): %s; ignored for them, only app containers and sidecars are resized",
		pod.Name, list)
}
