// SPDX-License-Identifier: MIT
/*
 * Lab stand-in of NVIDIA's kernel module: a real module, built by DKMS against real kernel headers, that does
 * nothing. It carries the name, version and licence of the module it stands in for.
 */
#include <linux/init.h>
#include <linux/module.h>

static int __init lab_standin_nvidia_init(void)
{
	pr_info("nvidia: lab stand-in %s loaded; it drives no GPU\n", "@VERSION@");
	return 0;
}

static void __exit lab_standin_nvidia_exit(void)
{
}

module_init(lab_standin_nvidia_init);
module_exit(lab_standin_nvidia_exit);

MODULE_LICENSE("@LICENSE@");
MODULE_DESCRIPTION("Lab stand-in of the NVIDIA @FLAVOUR@ GPU kernel module");
MODULE_VERSION("@VERSION@");
