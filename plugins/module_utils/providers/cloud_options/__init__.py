# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each cloud's adapter options (``cloud_options.<cloud>``), one module per cloud, in the
shape providers/options.py describes. Plain data: importing them loads no cloud SDK."""
