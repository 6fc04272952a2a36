# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RunPod REST API v2 error table.

v2 answers errors as RFC 9457 problem JSON (``title``, ``status``, ``detail``, optional
``errors`` list of validation strings) and has no machine-readable error codes, so the
rows match on the HTTP status and the ``detail`` text. The create table is the one the
v2 OpenAPI spec gives for ``createPod`` (422 fix the request; 400 next candidate; 402
stop; 403 skip the candidate; 429 back off with Retry-After; 5xx retry):

=========================================================  ===============================
status / detail                                            kind (block)
=========================================================  ===============================
create 400 "no longer any instances available", "not       Capacity (offer)
enough free GPUs", "does not have the resources", "no
capacity", "could not be placed"
create 403 (any detail: the spec's ForbiddenError says     Unavailable (offer): the spec's
"access denied" whether the pool or the key is refused)    "skip this candidate, keep going"
create 400 any other (a cross-field rule or capacity the   Failed (offer): the spec says try
text does not say)                                         the next candidate
401                                                        Credentials (cloud)
403                                                        Credentials (cloud)
402 insufficient balance                                   Quota (cloud): no offer succeeds
409 "cluster" (a cluster member pod)                       InvalidRequest
400, 404, 422                                              InvalidRequest
429 (with Retry-After)                                     Transient
5xx                                                        Transient
2xx whose body is not the documented JSON                  Failed (rest.py's default row)
=========================================================  ===============================
"""

from __future__ import annotations

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BlockScope, ErrorKind
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.rest import Rule

# The wordings RunPod uses for "no machine for this GPU here now" (create answers them as 400).
CAPACITY_MESSAGE = (r"no longer any instances available|not enough free gpus|does not have the resources"
                    r"|no (gpu )?capacity|insufficient capacity|could not be placed|no instances? (are )?available")

RULES = (
    Rule(ErrorKind.CREDENTIALS, status=(401, 403), block=BlockScope.CLOUD),
    Rule(ErrorKind.QUOTA, status=402, block=BlockScope.CLOUD),
    Rule(ErrorKind.INVALID_REQUEST, status=409, message=r"cluster"),
    Rule(ErrorKind.INVALID_REQUEST, status=(400, 404, 422)),
    Rule(ErrorKind.TRANSIENT, status=429),
    Rule(ErrorKind.TRANSIENT, status=range(500, 600)),
)

# POST /v2/pods: placement failures are the offer's, not the request's.
CREATE_RULES = (
    Rule(ErrorKind.CAPACITY, status=400, message=CAPACITY_MESSAGE),
    # createPod's 403 answers the shared ForbiddenError ("access denied"), and its table says
    # skip the candidate: never abort the whole launch on it.
    Rule(ErrorKind.UNAVAILABLE, status=403),
    Rule(ErrorKind.FAILED, status=400),
) + RULES
