// Command stub is a simulated host's systemctl (simhost.Unit): it passes its arguments to
// the test process and prints and exits as the answer says.
package main

import "github.com/akraino-edge-stack/bpa/test/framework/simhost/systemctl"

func main() { systemctl.Main() }
