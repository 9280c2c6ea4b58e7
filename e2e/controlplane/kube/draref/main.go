// Command draref runs kube-scheduler v1.37.2's structured DRA allocator
// (k8s.io/dynamic-resource-allocation/structured) with the scheduler's default
// feature gates, on cases read from stdin, so koordpy's allocator can be
// compared with it (tests/devices/test_allocator_differential.py).
//
// Input (stdin): a JSON list of cases
//
//	{"name": "...", "nodes": [Node], "classes": [DeviceClass], "slices": [ResourceSlice],
//	 "allocated": [ResourceClaim with status] (claims in use), "claims": [ResourceClaim] (one pod's)}
//
// Output (stdout): {"features": {...}, "cases": [{"name": "...", "error": "...",
// "nodes": {"<node>": {"verdict": "allocated"|"unschedulable"|"error", "message": "...",
// "allocations": {"<ns>/<claim>": AllocationResult}}}}]}.
//
// Per node it does what the DynamicResources plugin's PreFilter and Filter do with
// such a pod: a claim allocated already is checked against its allocation's node
// selector, a request naming a missing class makes the pod unschedulable, and the
// claims not allocated yet go to one Allocator built from the claims in use
// (the state the plugin gathers, consumable capacity included). The features are
// dynamicresources.AllocatorFeatures of the scheduler's default gates at v1.37
// (emulation 1.37, min compatibility 1.36, as kube-scheduler starts without flags);
// they are printed with the results.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/dynamic-resource-allocation/structured"
	resourcedefaults "k8s.io/kubernetes/pkg/apis/resource/v1"
	_ "k8s.io/kubernetes/pkg/features" // registers the gates' v1.37 defaults
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
)

type testCase struct {
	Name      string                       `json:"name"`
	Nodes     []*v1.Node                   `json:"nodes"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Allocated []*resourceapi.ResourceClaim `json:"allocated"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
	// DeviceTaintRules, applied to the slices as the scheduler's ResourceSlice tracker does.
	TaintRules []*resourceapi.DeviceTaintRule `json:"taintRules,omitempty"`
	// The plugin's filterTimeout in seconds (DynamicResourcesArgs; 0: its default, 10 s).
	FilterTimeout float64 `json:"filterTimeout,omitempty"`
	// Count how many such pods each node takes, up to this many (0: do not count).
	CapacityLimit int `json:"capacityLimit,omitempty"`

	patched  []*resourceapi.ResourceSlice // the slices with the rules' taints
	patchErr error
}

type nodeResult struct {
	Verdict     string                                  `json:"verdict"`
	Message     string                                  `json:"message,omitempty"`
	Allocations map[string]resourceapi.AllocationResult `json:"allocations,omitempty"`
	// With capacityLimit: how many pods with fresh claims of these specs the node takes one
	// after another (each allocated as its own Filter call would, on what the ones before took),
	// up to the limit; -1 when a pod's allocation ran out of time.
	Capacity *int `json:"capacity,omitempty"`
}

type caseResult struct {
	Name  string                 `json:"name"`
	Error string                 `json:"error,omitempty"`
	Nodes map[string]*nodeResult `json:"nodes"`
}

type output struct {
	Features structured.Features `json:"features"`
	Cases    []caseResult        `json:"cases"`
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// allocatedState is what the plugin's claim tracker gathers with consumable capacity on:
// a shared result (one with a share ID) counts its consumed capacity, any other non-admin
// result takes the whole device.
func allocatedState(claims []*resourceapi.ResourceClaim) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if result.AdminAccess != nil && *result.AdminAccess {
				continue
			}
			id := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
			if result.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, result.ShareID))
				if result.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, result.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	return state
}

// missingClass is the plugin's PreFilter check: every request's class (every subrequest's,
// for firstAvailable) must exist, whichever node.
func missingClass(claims []*resourceapi.ResourceClaim, classes classLister) string {
	for _, claim := range claims {
		if claim.Status.Allocation != nil {
			continue
		}
		for _, request := range claim.Spec.Devices.Requests {
			switch {
			case request.Exactly != nil:
				if _, ok := classes[request.Exactly.DeviceClassName]; !ok {
					return fmt.Sprintf("request %s: device class %s does not exist", request.Name, request.Exactly.DeviceClassName)
				}
			case len(request.FirstAvailable) > 0:
				for _, sub := range request.FirstAvailable {
					if _, ok := classes[sub.DeviceClassName]; !ok {
						return fmt.Sprintf("request %s/%s: device class %s does not exist", request.Name, sub.Name, sub.DeviceClassName)
					}
				}
			default:
				return fmt.Sprintf("resource claim %s/%s, request %s: unknown request type", claim.Namespace, claim.Name, request.Name)
			}
		}
	}
	return ""
}

// patchedSlices is ListWithDeviceTaintRules: the scheduler's ResourceSlice tracker, fed by
// informers on a fake clientset holding the case's slices and rules.
func patchedSlices(ctx context.Context, slices []*resourceapi.ResourceSlice, rules []*resourceapi.DeviceTaintRule) ([]*resourceapi.ResourceSlice, error) {
	var objects []runtime.Object
	for _, s := range slices {
		objects = append(objects, s)
	}
	for _, r := range rules {
		objects = append(objects, r)
	}
	client := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(ctx)
	t, err := tracker.StartTracker(ctx, tracker.Options{
		EnableDeviceTaintRules:   true,
		EnableConsumableCapacity: true,
		SliceInformer:            factory.Resource().V1().ResourceSlices(),
		TaintInformer:            factory.Resource().V1().DeviceTaintRules(),
	})
	if err != nil {
		cancel()
		return nil, err
	}
	// Stopped in this order: the informers end once the context is cancelled.
	defer func() {
		cancel()
		t.Stop()
		factory.Shutdown()
	}()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), t.HasSynced) {
		return nil, errors.New("the ResourceSlice tracker did not sync")
	}
	// The tracker patches asynchronously after syncing: wait until every slice is there.
	deadline := time.Now().Add(10 * time.Second)
	for {
		patched, err := t.ListPatchedResourceSlices()
		if err != nil {
			return nil, err
		}
		if len(patched) == len(slices) {
			return patched, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the ResourceSlice tracker has %d of %d slices", len(patched), len(slices))
		}
		time.Sleep(time.Millisecond)
	}
}

func runCase(ctx context.Context, features structured.Features, celCache *cel.Cache, c *testCase) caseResult {
	res := caseResult{Name: c.Name, Nodes: map[string]*nodeResult{}}
	classes := classLister{}
	for _, class := range c.Classes {
		classes[class.Name] = class
	}
	if msg := missingClass(c.Claims, classes); msg != "" {
		for _, node := range c.Nodes {
			res.Nodes[node.Name] = &nodeResult{Verdict: "unschedulable", Message: msg}
		}
		return res
	}
	var toAllocate []*resourceapi.ResourceClaim
	selectors := map[string]*nodeaffinity.NodeSelector{}
	for _, claim := range c.Claims {
		if claim.Status.Allocation == nil {
			toAllocate = append(toAllocate, claim)
			continue
		}
		if ns := claim.Status.Allocation.NodeSelector; ns != nil {
			sel, err := nodeaffinity.NewNodeSelector(ns)
			if err != nil {
				res.Error = err.Error()
				return res
			}
			selectors[claim.Namespace+"/"+claim.Name] = sel
		}
	}
	// The pod's claims allocated already are in use as well, as in the plugin's claim tracker.
	inUse := append([]*resourceapi.ResourceClaim{}, c.Allocated...)
	for _, claim := range c.Claims {
		if claim.Status.Allocation != nil {
			inUse = append(inUse, claim)
		}
	}
	if c.patchErr != nil {
		res.Error = c.patchErr.Error()
		return res
	}
	slices := c.Slices
	if c.patched != nil {
		slices = c.patched
	}
	allocator, err := structured.NewAllocator(ctx, features, allocatedState(inUse), classes, slices, celCache)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	for _, node := range c.Nodes {
		nr := &nodeResult{Verdict: "allocated"}
		res.Nodes[node.Name] = nr
		for key, sel := range selectors {
			if !sel.Match(node) {
				nr.Verdict, nr.Message = "unschedulable", fmt.Sprintf("claim %s: allocation's node selector does not match", key)
			}
		}
		if nr.Verdict != "allocated" {
			continue
		}
		// The plugin's default filter timeout (DRASchedulerFilterTimeout, beta, on).
		timeout := 10 * time.Second
		if c.FilterTimeout > 0 {
			timeout = time.Duration(c.FilterTimeout * float64(time.Second))
		}
		nodeCtx, cancel := context.WithTimeout(ctx, timeout)
		results, err := allocator.Allocate(nodeCtx, node, toAllocate)
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			nr.Verdict, nr.Message = "error", fmt.Sprintf("node %s: timed out trying to allocate devices", node.Name)
		case errors.Is(err, structured.ErrFailedAllocationOnNode):
			nr.Verdict, nr.Message = "unschedulable", err.Error()
		case err != nil:
			nr.Verdict, nr.Message = "error", err.Error()
		case len(results) != len(toAllocate):
			nr.Verdict, nr.Message = "unschedulable", "cannot allocate all claims"
		default:
			nr.Allocations = map[string]resourceapi.AllocationResult{}
			for i, claim := range toAllocate {
				nr.Allocations[claim.Namespace+"/"+claim.Name] = results[i]
			}
		}
		if c.CapacityLimit > 0 {
			n := podsThatFit(ctx, features, celCache, c, inUse, classes, slices, node, toAllocate, timeout)
			nr.Capacity = &n
		}
	}
	return res
}

// podsThatFit allocates pods with fresh claims of the same specs on node one after another, each
// on a new Allocator over what the pods before it took, until one does not fit or the limit.
func podsThatFit(ctx context.Context, features structured.Features, celCache *cel.Cache, c *testCase,
	inUse []*resourceapi.ResourceClaim, classes classLister, slices []*resourceapi.ResourceSlice,
	node *v1.Node, specs []*resourceapi.ResourceClaim, timeout time.Duration) int {
	held := append([]*resourceapi.ResourceClaim{}, inUse...)
	for n := 0; n < c.CapacityLimit; n++ {
		fresh := make([]*resourceapi.ResourceClaim, len(specs))
		for i, spec := range specs {
			fresh[i] = spec.DeepCopy()
			fresh[i].Name = fmt.Sprintf("%s-pod%d", spec.Name, n)
			fresh[i].UID = types.UID(fmt.Sprintf("%s-pod%d", spec.UID, n))
		}
		allocator, err := structured.NewAllocator(ctx, features, allocatedState(held), classes, slices, celCache)
		if err != nil {
			return n
		}
		nodeCtx, cancel := context.WithTimeout(ctx, timeout)
		results, err := allocator.Allocate(nodeCtx, node, fresh)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return -1
		}
		if err != nil || len(results) != len(fresh) {
			return n
		}
		for i := range fresh {
			fresh[i].Status.Allocation = &results[i]
			held = append(held, fresh[i])
		}
	}
	return c.CapacityLimit
}

func main() {
	var cases []*testCase
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cases); err != nil {
		fmt.Fprintf(os.Stderr, "draref: reading the cases: %v\n", err)
		os.Exit(2)
	}
	// The objects as the API server stores them: its defaults filled in (a request's mode and
	// count, a toleration's operator, a taint's timeAdded).
	for _, c := range cases {
		for _, claim := range append(append([]*resourceapi.ResourceClaim{}, c.Allocated...), c.Claims...) {
			resourcedefaults.SetObjectDefaults_ResourceClaim(claim)
		}
		for _, slice := range c.Slices {
			resourcedefaults.SetObjectDefaults_ResourceSlice(slice)
		}
		for _, rule := range c.TaintRules {
			resourcedefaults.SetObjectDefaults_DeviceTaintRule(rule)
		}
	}
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	features := dynamicresources.AllocatorFeatures(fts)
	// The plugin's CEL cache, as New sets it up.
	celCache := cel.NewCache(10, cel.Features{
		EnableConsumableCapacity: fts.EnableDRAConsumableCapacity,
		EnableListTypeAttributes: fts.EnableDRAListTypeAttributes,
	})
	out := output{Features: features}
	ctx := context.Background()
	// The tracker answers after its informers sync (a poll of 100 ms): the cases with rules are
	// patched side by side first.
	var wg sync.WaitGroup
	limit := make(chan struct{}, 32)
	for _, c := range cases {
		if len(c.TaintRules) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit <- struct{}{}
			defer func() { <-limit }()
			c.patched, c.patchErr = patchedSlices(ctx, c.Slices, c.TaintRules)
		}()
	}
	wg.Wait()
	for _, c := range cases {
		out.Cases = append(out.Cases, runCase(ctx, features, celCache, c))
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "draref: writing the results: %v\n", err)
		os.Exit(1)
	}
}
