"""The revisions, in order: 0001 orgs, agents, credentials; 0002 the update schedule (alone);
0003 the platform settings; 0004 releases, runs, events; 0005 the worker's reconcile and the
notifications; 0006 the panel's sign-in sessions; 0007 cap rules, named credentials, deleted
agents, hosts per agent and the operators' trail; 0008 one current release per (channel,
platform) and withdrawn releases; 0011 the change feed the workers' answer memory follows."""
