// The Gateway API conformance suite v1.3.0 with the addresses its GatewayStaticAddresses test
// needs, which `go test ./conformance` takes from no flag (a later release added
// --usable-address and --unusable-address). Copy this file into the suite's `conformance/`
// directory and run it as README's "Conformance" section shows; every other flag is the suite's.
//
//	USABLE_ADDRESS: a free IP of the cluster's Service range (the Gateway's Service takes it as
//	its cluster IP); UNUSABLE_ADDRESS: an IP outside that range (the API server refuses it).
package conformance_test

import (
	"os"
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/gateway-api/conformance"
)

func TestConformanceWithAddresses(t *testing.T) {
	usable, unusable := os.Getenv("USABLE_ADDRESS"), os.Getenv("UNUSABLE_ADDRESS")
	if usable == "" || unusable == "" {
		t.Fatal("set USABLE_ADDRESS and UNUSABLE_ADDRESS (IP addresses inside and outside the cluster's Service range)")
	}
	opts := conformance.DefaultOptions(t)
	ip := ptr.To(v1beta1.IPAddressType)
	opts.UsableNetworkAddresses = []v1beta1.GatewaySpecAddress{{Type: ip, Value: usable}}
	opts.UnusableNetworkAddresses = []v1beta1.GatewaySpecAddress{{Type: ip, Value: unusable}}
	conformance.RunConformanceWithOptions(t, opts)
}
