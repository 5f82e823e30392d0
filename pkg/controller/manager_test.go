package controller

import (
	"context"
	"fmt"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/akraino-edge-stack/bpa/pkg/observe/observetest"
)

// pagedLister serves n Workflows in pages of the requested limit, as the apiserver does.
type pagedLister struct {
	n     int
	calls []metav1.ListOptions
}

func (l *pagedLister) ListWithContext(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	l.calls = append(l.calls, opts)
	start := 0
	if opts.Continue != "" {
		_, _ = fmt.Sscan(opts.Continue, &start)
	}
	end := min(start+int(opts.Limit), l.n)
	if opts.Limit == 0 {
		end = l.n
	}
	list := &wfv1.WorkflowList{ListMeta: metav1.ListMeta{ResourceVersion: fmt.Sprint(100 + len(l.calls))}}
	for i := start; i < end; i++ {
		wf := observetest.FailedProvisioning()
		wf.Name = fmt.Sprintf("wf-%d", i)
		list.Items = append(list.Items, *wf)
	}
	if end < l.n {
		list.Continue = fmt.Sprint(end)
	}
	return list, nil
}

func (l *pagedLister) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

func TestWorkflowListIsPagedAndTrimmedPageByPage(t *testing.T) {
	l := &pagedLister{n: 7}
	lw := pagedTrimmingListWatch(l, 3)
	obj, err := lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0", Limit: 500})
	require.NoError(t, err)
	list := obj.(*wfv1.WorkflowList)

	require.Len(t, l.calls, 3, "7 Workflows in pages of 3")
	assert.Equal(t, int64(3), l.calls[0].Limit, "our page size, not the reflector's")
	assert.Empty(t, l.calls[0].ResourceVersion, `"0" would make the watch cache ignore the limit`)
	assert.Equal(t, "3", l.calls[1].Continue)
	assert.Equal(t, "101", list.ResourceVersion, "a paged list is the first page's snapshot")
	assert.Empty(t, list.Continue)
	require.Len(t, list.Items, 7)

	// A relist names the last resourceVersion seen: asked with a limit, the apiserver would
	// read exactly that revision (the old state), and a restarted apiserver's watch cache
	// would refuse the watch from it (test/integration's TestMirrorAfterAPIServerRestart).
	l.calls = nil
	_, err = lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "615", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	require.NoError(t, err)
	assert.Empty(t, l.calls[0].ResourceVersion, "a relist reads the newest state")
	assert.Empty(t, l.calls[0].ResourceVersionMatch)
	for i, wf := range list.Items {
		assert.Equal(t, fmt.Sprintf("wf-%d", i), wf.Name)
		assert.ElementsMatch(t, []string{"d", "r", "i", "k"}, keys(wf.Status.Nodes), "trimmed as its page arrived")
	}
}
