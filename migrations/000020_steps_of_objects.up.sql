-- A step of a business object (webhooks.Step.Object: an order's
-- confirmation and fulfillment call, an invoice attempt's email) is one per
-- object and step name, whichever event or path plans it first: a second
-- plan of it is not inserted (the step's INSERT … ON CONFLICT DO NOTHING
-- meets this index). Steps planned before this migration carry no object
-- and keep the keys they were sent with.
CREATE UNIQUE INDEX uq_steps_object ON processed_events ((payload ->> 'step_object'), step)
    WHERE kind = 'step' AND payload ? 'step_object';
