// Command celref evaluates DRA CEL selectors with kube-scheduler v1.37.2's own CEL environment, as
// its structured allocator does (stored expressions, DRAConsumableCapacity on, no cost estimate):
// one JSON object a line in, one a line out.
//
//	in:  {"expression": "...", "driver": "...", "attributes": {"name": {"int": 1}, ...},
//	      "capacity": {"name": "80Gi"}, "multi": false}
//	out: {"compile_error": "..."} or {"match": true, "cost": 4} or {"error": "...", "cost": 3}
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"
)

// attribute is one device attribute in the wire form of resource.k8s.io/v1 (one field set).
type attribute struct {
	Int      *int64   `json:"int,omitempty"`
	Bool     *bool    `json:"bool,omitempty"`
	String   *string  `json:"string,omitempty"`
	Version  *string  `json:"version,omitempty"`
	Ints     []int64  `json:"ints,omitempty"`
	Bools    []bool   `json:"bools,omitempty"`
	Strings  []string `json:"strings,omitempty"`
	Versions []string `json:"versions,omitempty"`
}

type input struct {
	Expression string               `json:"expression"`
	Driver     string               `json:"driver"`
	Attributes map[string]attribute `json:"attributes"`
	Capacity   map[string]string    `json:"capacity"`
	Multi      bool                 `json:"multi"`
}

type output struct {
	CompileError string `json:"compile_error,omitempty"`
	Error        string `json:"error,omitempty"`
	Match        bool   `json:"match"`
	Cost         uint64 `json:"cost"`
}

func main() {
	compiler := cel.GetCompiler(cel.Features{EnableConsumableCapacity: true})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var c input
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			fmt.Fprintln(os.Stderr, "celref:", err)
			os.Exit(2)
		}
		var o output
		res := compiler.CompileCELExpression(c.Expression, cel.Options{DisableCostEstimation: true})
		if res.Error != nil {
			o.CompileError = res.Error.Error()
			_ = out.Encode(o)
			continue
		}
		device := cel.Device{Driver: c.Driver, AllowMultipleAllocations: ptr.To(c.Multi),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
			Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}}
		for name, a := range c.Attributes {
			device.Attributes[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{
				IntValue: a.Int, BoolValue: a.Bool, StringValue: a.String, VersionValue: a.Version,
				IntValues: a.Ints, BoolValues: a.Bools, StringValues: a.Strings, VersionValues: a.Versions}
		}
		for name, q := range c.Capacity {
			device.Capacity[resourceapi.QualifiedName(name)] = resourceapi.DeviceCapacity{Value: resource.MustParse(q)}
		}
		match, details, err := res.DeviceMatches(context.Background(), device)
		o.Match = match
		if details != nil && details.ActualCost() != nil {
			o.Cost = *details.ActualCost()
		}
		if err != nil {
			o.Error = err.Error()
		}
		_ = out.Encode(o)
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "celref:", err)
		os.Exit(2)
	}
}
