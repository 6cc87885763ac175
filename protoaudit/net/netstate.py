"""Which layers a NetState keeps: Caffe's Net::FilterNet and StateMeetsRule."""
from ..errors import InputError


def make_state(net, phase=None, stages=(), level=None):
    """The NetState Caffe builds for a net file: the file's own `state`, then the caller's flags."""
    state = type(net.state)()
    state.CopyFrom(net.state)
    if phase is not None:
        state.phase = state.DESCRIPTOR.fields_by_name["phase"].enum_type.values_by_name[phase].number
    state.stage.extend(stages)
    if level is not None:
        state.level = level
    return state


def meets_rule(state, rule):
    if rule.HasField("phase") and rule.phase != state.phase:
        return False
    if rule.HasField("min_level") and state.level < rule.min_level:
        return False
    if rule.HasField("max_level") and state.level > rule.max_level:
        return False
    if any(stage not in state.stage for stage in rule.stage):
        return False
    if any(stage in state.stage for stage in rule.not_stage):
        return False
    return True


def included(layer, state):
    """Whether `layer` (a V2 LayerParameter) is part of the net in this state."""
    include, exclude = layer.include, layer.exclude  # each read from the message once
    if include and exclude:
        raise InputError(
            "specifies both include and exclude rules",
            layer=layer.name,
            fix="Caffe accepts either include rules or exclude rules, not both",
        )
    if include:
        return any(meets_rule(state, rule) for rule in include)
    return not exclude or not any(meets_rule(state, rule) for rule in exclude)


def keeps_the_same_layers(net_param, state, other):
    """Whether NetStates `state` and `other` keep the same layers of `net_param` (Caffe's FilterNet):
    then the two nets are one net, and building the second would only repeat the first."""
    return all(included(lp, state) == included(lp, other) for lp in net_param.layer)


def phase_name(state):
    return state.DESCRIPTOR.fields_by_name["phase"].enum_type.values_by_number[state.phase].name



def layer_phase(layer):
    """The phase a LayerParameter sets for itself (its name), or None: it runs in the net's."""
    if not layer.HasField("phase"):
        return None
    return layer.DESCRIPTOR.fields_by_name["phase"].enum_type.values_by_number[layer.phase].name
