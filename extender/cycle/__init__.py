"""The scheduling cycles, pure: a pod's (`pod`), a pod group's (`group`), and the steps after
a decision (`steps`: Reserve, assume, PreBind and bind, or give back).

Modelled on kube-scheduler v1.36's schedule_one.go and schedule_one_podgroup.go. The standalone
scheduler, simulate and the webhook's bind reach them through small Protocols of their own
(`ClusterView`, `GroupHost`, `PlaceHost`, `Binder`); nothing here does IO or reads a clock.
"""
