// SPDX-License-Identifier: MIT
/*
 * Lab stand-in of NVIDIA's unified memory module, with the parameter that the collection sets
 * (nvidia_driver_uvm_disable_hmm) so that modprobe.d options and modinfo see it as on a real host.
 */
#include <linux/init.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

static int uvm_disable_hmm;
module_param(uvm_disable_hmm, int, 0444);
MODULE_PARM_DESC(uvm_disable_hmm, "Force-disable HMM functionality in the UVM driver");

static int __init lab_standin_uvm_init(void)
{
	return 0;
}

static void __exit lab_standin_uvm_exit(void)
{
}

module_init(lab_standin_uvm_init);
module_exit(lab_standin_uvm_exit);

MODULE_LICENSE("@LICENSE@");
MODULE_DESCRIPTION("Lab stand-in of the NVIDIA unified memory module");
MODULE_VERSION("@VERSION@");
