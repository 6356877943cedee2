"""Messages say what they carry: a reply goes to something that can be told, a reload carries a config."""

import pytest
from pydantic import ValidationError

from actors.reconfigure import Reconfigure
from messages.commands import Append, Appended, Review, Subscribe, Unsubscribe


class Inbox:
    def __init__(self):
        self.told = []

    def tell(self, message):
        self.told.append(message)


def test_a_reply_goes_to_what_can_be_told_and_its_tag_comes_back_untouched():
    inbox, tag = Inbox(), object()
    msg = Append(facts=[], reply_to=inbox, tag=tag)
    msg.reply_to.tell(Appended(tag=msg.tag))
    assert inbox.told == [Appended(tag=tag)] and inbox.told[0].tag is tag


@pytest.mark.parametrize("make", [
    lambda: Append(facts=[], reply_to="journal"),
    lambda: Review(orders=[], reply_to=None),
    lambda: Subscribe(ref=42),
    lambda: Unsubscribe(ref=object()),
], ids=["append", "review", "subscribe", "unsubscribe"])
def test_a_message_addressed_to_what_cannot_hear_it_is_refused_where_it_is_made(make):
    with pytest.raises(ValidationError, match="Recipient"):
        make()


def test_a_reload_carries_a_config():
    with pytest.raises(ValidationError, match="config"):
        Reconfigure(config={"providers": []})
